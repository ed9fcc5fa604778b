"""The statistical core (numpy/scipy only): the contextual Bradley-Terry-Luce likelihood
(:mod:`.likelihood`, :mod:`.contrasts`), the Newton systems (:mod:`.systems`), the constrained and
ridge MLEs (:mod:`.mle`), the debiased estimator and its CIs (:mod:`.inference`), the size limits
(:mod:`.limits`) and the input checks (:mod:`._validate`).  It imports nothing else of the package.
"""
from .inference import DebiasResult, debias
from .mle import fit_btl

__all__ = ["DebiasResult", "debias", "fit_btl"]
