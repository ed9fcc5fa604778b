"""The LLM-ranking application (paper section "Applications to Language Model Ranking"):
`python jobs/llm_ranking.py --help` for the flags; `--arena` for the Chatbot Arena replay,
`--judgments FILE` for your own judgments.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main_llm

if __name__ == "__main__":
    sys.exit(main_llm())
