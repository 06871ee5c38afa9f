"""Entry point: `python -m marlow_torch --in-fd N --out-fd M`, or
`python PATH/marlow_torch ...` (how the Go client starts it)."""

import os
import sys

if not __package__:
    # Run as a folder: import the package from the folder above it, not
    # its modules as top-level ones.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from marlow_torch.cli import main

if __name__ == "__main__":
    main()
