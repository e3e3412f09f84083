"""``python -m contextplane`` is the ``contextplane`` command."""

from contextplane.cli import main

if __name__ == "__main__":
    main()
