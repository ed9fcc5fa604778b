"""study: contextual online uncertainty-aware preference learning (Lu, Lee, Fang, Lu).

The package's layers, each a folder (``docs/api.md`` lists the public API):

* :mod:`study.core` -- the statistical core: the contextual BTL likelihood, the constrained and
  ridge MLEs, the debiased estimator and its CIs (numpy/scipy only);
* :mod:`study.simulation` and :mod:`study.policies` -- settings, environments, the replication
  loop, and the policies that choose pairs in it;
* :mod:`study.llm` -- the paper's LLM-ranking application (replays of judgments);
* :mod:`study.online`, :mod:`study.leaderboard` -- the online ranker; leaderboards from files of
  judgments (same layer as :mod:`study.llm`);
* :mod:`study.results` -- stored results (checksummed Parquet), figures, the summary table;
* :mod:`study.runner` -- the Ray runner: plans, tasks, resume, the driver;
* :mod:`study.cli` -- the command line (``jobs/*.py``).

Imports run one way: core <- simulation/policies <- llm <- results <- runner <- cli.
"""
from typing import TYPE_CHECKING

from ._util import lazy_exports
from ._version import __version__

# Each public name is imported when first used (PEP 562): ``import study`` alone imports no scipy,
# pandas, matplotlib or Ray, so a judge's ``from study.online import Client`` starts fast.
_EXPORTS = {
    **dict.fromkeys(("BootstrapResult", "DebiasResult", "bootstrap", "debias", "fit_btl"), ".core"),
    **dict.fromkeys(("ALL_METHODS", "BASELINES", "METHODS", "Choice", "Policy", "Step", "policy_provenance",
                     "register_policy", "resolve_methods"), ".policies"),
    **dict.fromkeys(("PolicyCheckError", "PolicyCheckReport", "check_policy"), ".policies.checks"),
    "load": ".results",
    **dict.fromkeys(("run_environment", "run_replication"), ".simulation.replication"),
    "ReplicationResult": ".simulation.result",
    **dict.fromkeys(("load_settings_file", "register_setting", "unregister_setting"), ".simulation.named"),
    **dict.fromkeys(("SETTINGS", "Setting", "resolve_setting"), ".simulation.settings"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what static tools see: the same names, imported eagerly
    from .core import BootstrapResult, DebiasResult, bootstrap, debias, fit_btl
    from .policies import (ALL_METHODS, BASELINES, METHODS, Choice, Policy, Step, policy_provenance, register_policy,
                           resolve_methods)
    from .policies.checks import PolicyCheckError, PolicyCheckReport, check_policy
    from .results import load
    from .simulation.replication import run_environment, run_replication
    from .simulation.result import ReplicationResult
    from .simulation.named import load_settings_file, register_setting, unregister_setting
    from .simulation.settings import SETTINGS, Setting, resolve_setting

__all__ = ["METHODS", "BASELINES", "ALL_METHODS", "Policy", "Step", "Choice", "register_policy", "resolve_methods",
           "check_policy", "PolicyCheckReport", "PolicyCheckError",
           "policy_provenance", "SETTINGS", "Setting", "resolve_setting", "fit_btl", "debias", "DebiasResult",
           "bootstrap", "BootstrapResult", "run_replication", "run_environment", "ReplicationResult", "load", "__version__"]
__all__ += ["register_setting", "unregister_setting", "load_settings_file"]  # named settings (docs/settings.md)
