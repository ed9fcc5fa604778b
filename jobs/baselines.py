"""Beyond the paper: the paper's five methods against nine baselines (docs/baselines.md) on Settings A
and B under both warm-up protocols (studies baselines_random, baselines_greedy) and on the LLM-ranking
replay (llm_baselines), then figures, the summary table and the verdicts (OUT/verdicts.md).
`python jobs/baselines.py --help` for the flags.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main_baselines

if __name__ == "__main__":
    sys.exit(main_baselines())
