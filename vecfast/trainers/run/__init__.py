"""The run: ``train()``, the run spec it resolves once, the env source, the launcher and its ranks, the run
directory, collectives, metrics and the progress line.
"""
