"""The five methods of the paper's section "Numerical Studies" as :class:`study.Policy` objects.

Every step picks a major item i_t and an opponent j_t along an edge of the comparison graph:

* exploration step (probability t^-alpha while t <= ``explore_until``): a uniformly random edge,
  the major item a uniformly random end of it;
* otherwise i_t = argmax_i index_i(X_t) and j_t a uniform neighbour of i_t, where the index is
  X_t' theta_i(t-1) (greedy, paper eq. ``it``) or, for the UCB methods,
  X_t' theta_d_i(t-1) + sqrt(X_t' (Phi_11)_ii X_t) sqrt(2 log(nT)) once Phi is available
  (before: the warm-up rule of ``Setting.warmup``, greedy by default; :mod:`.warmup`).

RB (Algorithm 1) explores for t <= T0; ERA always; ETA never; BT-UCB1 never (UCB index);
BT-UCB2 explores for t <= T0 and uses the UCB index otherwise.  The argmax runs over the items
that have a neighbour (all items of a connected graph; see :func:`.base.argmax_playable`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Choice, Step, argmax_playable, available, random_edge, uniform_neighbour
from .warmup import warmup_choice, warmup_rule


def ucb_width(setting) -> float:
    """sqrt(2 log(nT)), the paper's BT-UCB confidence width (section "Numerical Studies")."""
    return float(np.sqrt(2.0 * np.log(setting.n_items * setting.T)))


@dataclass(frozen=True)
class EpsilonGreedy:
    """Explore with probability t^-alpha for t <= ``explore_until``; otherwise the argmax of the
    greedy index X_t' theta_i(t-1), or of the UCB index when ``ucb_width`` is set, against a
    uniform neighbour.  With the UCB index, a non-exploring step while Phi does not exist follows
    ``warmup`` (``"greedy"``, the paper's BT-UCB, or ``"random"``: :mod:`.warmup`)."""

    name: str
    explore_until: int
    alpha: float
    ucb_width: float | None = None
    warmup: str = "greedy"

    @property
    def prefix_key(self):
        """Policies of this family with equal keys choose identically while both explore alike,
        i.e. for t <= min(explore_until) (see study.simulation.replication.run_environment_methods)."""
        return (type(self).__qualname__, self.alpha, self.ucb_width, self.warmup)  # a subclass may choose differently

    @property
    def prefix_until(self) -> int:
        return self.explore_until

    @property
    def until_phi_key(self):
        """Policies of this family with equal keys choose identically up to the first step at which
        they do not explore and Phi is available: until then a UCB policy with the greedy warm-up
        takes the greedy step, as the greedy policy does (BT-UCB2 is RB, BT-UCB1 is ETA, step for
        step).  None for a UCB policy with another warm-up (see run_environment_methods)."""
        if self.ucb_width is not None and self.warmup != "greedy":
            return None
        return (type(self).__qualname__, self.explore_until, self.alpha)

    @property
    def asks_phi(self) -> bool:
        """Does the policy ask for the debiased estimate at its non-exploring steps?"""
        return self.ucb_width is not None

    def explores(self, t: int, coin: float) -> bool:
        return t <= self.explore_until and coin < t ** (-self.alpha)

    def index(self, step: Step) -> np.ndarray:
        """Scores of all items for the step's context."""
        if self.ucb_width is not None:
            db = available(step)
            if db is not None:
                return db.theta_d @ step.x + np.sqrt(np.maximum(db.spread(step.x), 0.0)) * self.ucb_width
        return step.theta @ step.x

    def select(self, step: Step) -> Choice:
        if self.explores(step.t, step.coin):
            return random_edge(step)
        if self.ucb_width is not None and available(step) is None:
            return warmup_choice(step, self.warmup)
        major = argmax_playable(step, self.index(step))
        return Choice(major, uniform_neighbour(step, major), False)


def rb(setting) -> EpsilonGreedy:
    """RB, the paper's Algorithm 1: epsilon-greedy (t^-alpha) up to T0, greedy after."""
    return EpsilonGreedy("RB", setting.T0, setting.alpha)


def era(setting) -> EpsilonGreedy:
    """ERA (explore always): epsilon-greedy (t^-alpha) for every t <= T."""
    return EpsilonGreedy("ERA", setting.T, setting.alpha)


def eta(setting) -> EpsilonGreedy:
    """ETA (exploit always): greedy at every step."""
    return EpsilonGreedy("ETA", 0, setting.alpha)


def bt_ucb1(setting) -> EpsilonGreedy:
    """BT-UCB1: the UCB index at every step (greedy while Phi is not available, or the
    ``Setting.warmup`` rule)."""
    return EpsilonGreedy("BT-UCB1", 0, setting.alpha, ucb_width(setting), warmup_rule(setting, "greedy"))


def bt_ucb2(setting) -> EpsilonGreedy:
    """BT-UCB2: epsilon-greedy (t^-alpha) with the UCB index up to T0, the UCB index after."""
    return EpsilonGreedy("BT-UCB2", setting.T0, setting.alpha, ucb_width(setting), warmup_rule(setting, "greedy"))
