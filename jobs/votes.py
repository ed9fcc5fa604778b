"""Votes to a decision: `python jobs/votes.py --help` for the flags (`--quick` on a laptop in
minutes).  A thin wrapper over study.runner.votes."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.runner.votes import main

if __name__ == "__main__":
    sys.exit(main())
