"""What every trainer layer shares, and so imports nothing of theirs: collectives over a distributed run's ranks,
the metrics records, and the torch runtime's setup."""
