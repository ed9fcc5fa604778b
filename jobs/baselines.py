"""Beyond the paper: the paper's five methods against four contextual dueling-bandit baselines on
Settings A and B and the LLM-ranking replay, then figures and the summary table.
`python jobs/baselines.py --help` for the flags.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main_baselines

if __name__ == "__main__":
    sys.exit(main_baselines())
