"""MaxFirstUCBNext: the estimated best item against its most optimistic challenger, a baseline of
the contextual dueling-bandit literature (VACDB: Di et al., ICLR 2024; the authors' code
``uclaml/VACDB``, ``ucb.py:41-50``), adapted to item-specific theta_i and a graph.

The source takes the first arm x = argmax over the candidate set D_t of x'theta^ (D_t: the arms
that no other arm beats with confidence, MaxInP's set, ``vdb.py:54-60``), and the second arm

    y = argmax_y  y'theta^ + beta ||x - y||_{Sigma_t^{-1}}

(the upper confidence bound of y's advantage over x), beta = 2 sqrt(d log T) (``ucb.py:9-26``).
Here (Corollary "inf"; item i's feature e_i (x) X_t):

    i_t = argmax_i X_t'theta_d_i over the items with a neighbour,
    j_t = argmax_{j in N(i_t)} X_t'theta_d_j + w sd_{j, i_t},  sd^2 = Var X_t'(theta_d_j - theta_d_i)

(:meth:`study.DebiasResult.pair_spread`: Phi_11's Fisher-weighted local norm).  Adaptations: the
argmax over D_t is the greedy item (the item of largest estimated utility is never beaten with
confidence, so it is always in D_t) -- the source's ``np.argmax(u_hat * Dt)`` (``ucb.py:45``) zeroes
the utilities outside D_t and so picks an arm outside it whenever every candidate's utility is
negative, which is not the rule it states; the second item is one of i_t's neighbours (the source
may return the first arm itself, which has bonus 0); w = sqrt(2 log(nT)) replaces beta (as for
MaxInP and CoLSTIM, docs/baselines.md).  MaxFirstUCBNext is CoLSTIM with every perturbation 0.

Before Phi is available: a uniformly random edge (its own rule here, as for MaxPairUCB: the source
has no warm-up, ``db.py:77``, because its ridge prior makes the width exist from t = 1);
``Setting.warmup`` may replace it (:mod:`.warmup`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Choice, Step, argmax_playable
from .pairs import optimistic_neighbour
from .paper import ucb_width
from .warmup import PhiRule, warmup_rule


@dataclass(frozen=True)
class MaxFirstUCBNext(PhiRule):
    """Greedy first item, most optimistic neighbour second (module docstring); ``warmup``: the
    rule while Phi does not exist."""

    width: float
    name: str = "MaxFirstUCBNext"
    warmup: str = "random"

    def choose(self, step: Step, db) -> Choice:
        utility = db.theta_d @ step.x
        major = argmax_playable(step, utility)
        return Choice(major, optimistic_neighbour(step, db, utility, major, self.width), False)


def max_first_ucb_next(setting) -> MaxFirstUCBNext:
    return MaxFirstUCBNext(width=ucb_width(setting), warmup=warmup_rule(setting, "random"))
