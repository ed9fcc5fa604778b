"""Redraw every figure and the summary table from the stored Parquet results:
`python jobs/figures.py --out outputs`.  A thin wrapper over study.cli."""
import sys

import _bootstrap  # noqa: F401  (see jobs/_bootstrap.py; before `study` is imported)
from study.cli import main_figures

if __name__ == "__main__":
    sys.exit(main_figures())
