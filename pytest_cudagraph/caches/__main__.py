"""``python -m pytest_cudagraph.caches SPEC``: one warm pass of a callable in a fresh interpreter."""

import sys

from .child import _child_main

sys.exit(_child_main(sys.argv[1:]))
