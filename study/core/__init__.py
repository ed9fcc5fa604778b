"""The statistical core (numpy/scipy only): the contextual Bradley-Terry-Luce likelihood
(:mod:`.likelihood`, :mod:`.contrasts`), the Newton systems (:mod:`.systems`), the constrained and
ridge MLEs (:mod:`.mle`), the debiased estimator and its CIs (:mod:`.inference`; sandwich standard
errors: :mod:`.sandwich`), the bootstrap of the fit (:mod:`.bootstrap`), the offline path (exact
aggregation of identical rows, :mod:`.aggregate`; Newton over the arrays and the judge-clustered
meat, :mod:`.batch`), how outcomes are counted (:mod:`.outcomes`), the size limits (:mod:`.limits`)
and the input checks (:mod:`._validate`).  It imports nothing else of the package.
"""
from .bootstrap import BootstrapResult, bootstrap
from .inference import DebiasResult, debias
from .mle import fit_btl

__all__ = ["BootstrapResult", "DebiasResult", "bootstrap", "debias", "fit_btl"]
