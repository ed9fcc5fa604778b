"""The paper's whole study: regret, coverage and M-sweep, then every figure and the summary
table.  `python jobs/paper.py --help` for the flags.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main_paper

if __name__ == "__main__":
    sys.exit(main_paper())
