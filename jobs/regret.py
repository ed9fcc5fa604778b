"""The regret study: `python jobs/regret.py --help` for the flags.  A thin wrapper over study.cli."""
import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
try:
    import study  # noqa: F401  (the installed package)
except ImportError:  # running from a source checkout / Ray working-dir copy without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from study.cli import main

if __name__ == "__main__":
    sys.exit(main("regret"))
