"""The coverage study: `python jobs/coverage.py --help` for the flags.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main

if __name__ == "__main__":
    sys.exit(main("coverage"))
