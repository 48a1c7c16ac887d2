"""``python -m pytest_cudagraph compare BASE.json NEW.json``."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
