"""study: contextual online uncertainty-aware preference learning (Lu, Lee, Fang, Lu).

Public API: SETTINGS, Setting, METHODS, fit_btl, debias, run_replication.
"""
from .settings import METHODS, SETTINGS, Setting, resolve_setting
from .result import ReplicationResult

__version__ = "0.1.0"

__all__ = ["METHODS", "SETTINGS", "Setting", "resolve_setting", "ReplicationResult", "__version__"]
