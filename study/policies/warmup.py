"""The warm-up protocol: what a method whose rule needs Phi does while Phi does not exist.

Phi_11 (the covariance of the debiased estimate, Corollary "inf") exists only once the data
identify theta (Psi_t non-singular): on average after tens of steps in Settings A and B, never on a
disconnected graph.  Before that, a method that needs it (BT-UCB1/2, TS, MaxInP, CoLSTIM, the
VACDB baselines, GURO, BALD) must choose by another rule.  ``Setting.warmup`` picks that rule for
every such method alike, so that a comparison is not decided by who warms up how:

* ``"own"`` -- each method's own rule (``own`` below): greedy for BT-UCB and TS, uniformly random
  edges for the methods whose sources start with random pairs (the default, as before this field);
* ``"random"`` -- a uniformly random edge (shared ``edge``/``end`` uniforms; ``explored = True``);
* ``"greedy"`` -- i_t = argmax_i X_t'theta_i(t-1) against a uniform neighbour (shared
  ``neighbour`` uniform; ``explored = False``), the greedy step of ETA.

RB, ERA and ETA never need Phi; RB-UA's major item never does either, and before Phi it is RB step
for step (docs/baselines.md).  The loop records, per step, whether the policy asked for Phi and
found none (``before_phi``), so that the steps each method spent in its warm-up are on record.
"""
from __future__ import annotations

from .base import Choice, Step, argmax_playable, available, random_edge, uniform_neighbour

RULES = ("random", "greedy")


def warmup_rule(setting, own: str) -> str:
    """The rule (``"random"`` or ``"greedy"``) a method whose own pre-Phi rule is ``own`` follows
    in ``setting`` (``setting.warmup``; ``"own"`` keeps ``own``)."""
    if own not in RULES:
        raise ValueError(f"a method's own warm-up rule must be one of {RULES}, got {own!r}")
    chosen = getattr(setting, "warmup", "own") if setting is not None else "own"
    return own if chosen == "own" else chosen


def greedy_step(step: Step) -> Choice:
    """The greedy step: the item with the largest X_t'theta_i(t-1) (over items with a neighbour)
    against a uniformly random neighbour."""
    major = argmax_playable(step, step.theta @ step.x)
    return Choice(major, uniform_neighbour(step, major), False)


def warmup_choice(step: Step, rule: str) -> Choice:
    """The step a method takes while Phi does not exist, by ``rule`` (``"random"``/``"greedy"``)."""
    if rule == "random":
        return random_edge(step)
    if rule == "greedy":
        return greedy_step(step)
    raise ValueError(f"warm-up rule must be one of {RULES}, got {rule!r}")


class PhiRule:
    """Base of the rules that need Phi: ``select`` takes the warm-up step (``self.warmup``) while
    Phi does not exist, and asks ``self.choose(step, db)`` with the debiased estimate ``db`` after."""

    warmup: str = "random"

    def select(self, step: Step) -> Choice:
        db = available(step)
        if db is None:
            return warmup_choice(step, self.warmup)
        return self.choose(step, db)

    def choose(self, step: Step, db) -> Choice:
        raise NotImplementedError
