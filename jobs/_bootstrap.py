"""Shared start-up of the job scripts (imported as ``import _bootstrap``: a script's own folder is
first on sys.path): no Ray usage stats, and ``study`` importable from a source checkout or a
``ray job submit`` working-dir copy where the package is not installed."""
import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
try:
    import study  # noqa: F401  (the installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
