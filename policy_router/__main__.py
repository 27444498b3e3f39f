"""`python -m policy_router ...`: the same verbs as the `policy-router` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
