"""``python -m pipeline RECIPE.yaml``: see :mod:`pipeline.runner`."""

import sys

from pipeline.runner import main

if __name__ == "__main__":
    sys.exit(main())
