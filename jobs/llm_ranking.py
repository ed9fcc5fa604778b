"""The LLM-ranking application (paper section "Applications to Language Model Ranking"):
`python jobs/llm_ranking.py --help` for the flags; `--arena` for the Chatbot Arena replay,
`--judgments FILE` for your own judgments.  A thin wrapper over study.cli."""
import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
try:
    import study  # noqa: F401  (the installed package)
except ImportError:  # running from a source checkout / Ray working-dir copy without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from study.cli import main_llm

if __name__ == "__main__":
    sys.exit(main_llm())
