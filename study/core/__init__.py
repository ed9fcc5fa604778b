"""The statistical core (numpy/scipy only): the contextual Bradley-Terry-Luce likelihood
(:mod:`.likelihood`, :mod:`.contrasts`), the Newton systems (:mod:`.systems`), the constrained and
ridge MLEs (:mod:`.mle`), the debiased estimator and its CIs (:mod:`.inference`; sandwich standard
errors: :mod:`.sandwich`), the bootstrap of the fit (:mod:`.bootstrap`), the offline path (exact
aggregation of identical rows, :mod:`.aggregate`; Newton over the arrays and the judge-clustered
meat, :mod:`.batch`), how outcomes are counted (:mod:`.outcomes`), the size limits (:mod:`.limits`)
and the input checks (:mod:`._validate`).  It imports nothing else of the package.
"""
from typing import TYPE_CHECKING

from .._util import lazy_exports

# Imported when first used (PEP 562): a module that needs only the input checks (``._validate``,
# numpy) does not pay for scipy.
__getattr__, __dir__ = lazy_exports(__name__, {"BootstrapResult": ".bootstrap", "bootstrap": ".bootstrap",
                                               "DebiasResult": ".inference", "debias": ".inference",
                                               "fit_btl": ".mle"})
if TYPE_CHECKING:
    from .bootstrap import BootstrapResult, bootstrap
    from .inference import DebiasResult, debias
    from .mle import fit_btl

__all__ = ["BootstrapResult", "DebiasResult", "bootstrap", "debias", "fit_btl"]
