"""``python -m vecfast``: same as the ``vecfast`` console script."""

from vecfast.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
