"""study: contextual online uncertainty-aware preference learning (Lu, Lee, Fang, Lu).

Public API: SETTINGS, Setting, METHODS, fit_btl, debias, run_replication.
"""
from .inference import DebiasResult, debias
from .mle import fit_btl
from .replication import run_environment, run_replication
from .result import ReplicationResult
from .settings import METHODS, SETTINGS, Setting, resolve_setting

__version__ = "0.1.0"

__all__ = ["METHODS", "SETTINGS", "Setting", "resolve_setting", "fit_btl", "debias", "DebiasResult",
           "run_replication", "run_environment", "ReplicationResult", "__version__"]
