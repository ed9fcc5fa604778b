"""Redraw every figure and the summary table from the stored Parquet results:
`python jobs/figures.py --out outputs`.  A thin wrapper over study.cli."""
import os
import sys

try:
    import study  # noqa: F401  (the installed package)
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from study.cli import main_figures

if __name__ == "__main__":
    sys.exit(main_figures())
