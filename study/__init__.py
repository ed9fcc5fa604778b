"""study: contextual online uncertainty-aware preference learning (Lu, Lee, Fang, Lu).

Public API: SETTINGS, Setting, METHODS, fit_btl, debias, run_replication; the policy interface
Policy, Step, Choice, register_policy (docs/baselines.md).
"""
from .inference import DebiasResult, debias
from .policies import Choice, Policy, Step, policy_provenance, register_policy, resolve_methods
from .mle import fit_btl
from .replication import run_environment, run_replication
from .result import ReplicationResult
from .settings import ALL_METHODS, BASELINES, METHODS, SETTINGS, Setting, resolve_setting

__version__ = "0.1.0"

__all__ = ["METHODS", "BASELINES", "ALL_METHODS", "Policy", "Step", "Choice", "register_policy", "resolve_methods",
           "policy_provenance", "SETTINGS", "Setting", "resolve_setting", "fit_btl", "debias", "DebiasResult",
           "run_replication", "run_environment", "ReplicationResult", "__version__"]
