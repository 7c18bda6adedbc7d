"""``python -m pai.core``: the ``pai`` command line (same as ``python -m pai.core.cli``)."""

from pai.core.cli import main

if __name__ == "__main__":
    main()
