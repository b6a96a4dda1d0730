"""``python -m doctrine``: see :mod:`doctrine.cli`."""

import sys

from doctrine.cli import main

if __name__ == "__main__":
    sys.exit(main())
