"""Policies: the :class:`Policy` protocol (:mod:`.base`), the paper's five methods (:mod:`.paper`),
the baselines (:mod:`.thompson`, :mod:`.maxinp`, :mod:`.maxpair`, :mod:`.maxfirst`,
:mod:`.colstim`, :mod:`.guro`, :mod:`.bald`, :mod:`.rb_ua`; docs/baselines.md), the warm-up protocol
before Phi exists (:mod:`.warmup`), the name registry (:mod:`.registry`) and the check suite for any
policy (:mod:`.checks`, ``study.check_policy``).

A user policy needs no change to the package::

    from study import Choice, register_policy, run_replication
    from study.policies import random_edge, uniform_neighbour, argmax_playable

    class Greedy:
        def __init__(self, setting):
            pass
        def select(self, step):
            major = argmax_playable(step, step.theta @ step.x)
            return Choice(major, uniform_neighbour(step, major), False)

    register_policy("greedy", Greedy)              # or pass "mymodule:Greedy" as the method
    run_replication("A", "greedy", seed=0)
"""
from ..simulation.seeds import policy_generator, stable_int
from .base import (Choice, Policy, Step, argmax_neighbour, argmax_playable, available, pick, random_edge,
                   uniform_neighbour)
from .bald import BALD
from .colstim import CoLSTIM
from .guro import GURO
from .maxfirst import MaxFirstUCBNext
from .maxinp import MaxInP
from .maxpair import MaxPairUCB
from .paper import EpsilonGreedy, ucb_width
from .provenance import UnhashablePolicy
from .rb_ua import UncertaintyAwareRB
from .registry import (ALL_METHODS, BASELINES, BUILTIN, METHODS, NEEDS_PHI, check_method, make_policy,
                       policy_provenance, register_policy, registered_policies, resolve_methods, resolve_policy,
                       unregister_policy)
from .thompson import DoubleThompson
from .warmup import greedy_step, warmup_choice, warmup_rule

__all__ = ["Choice", "Policy", "Step", "EpsilonGreedy", "DoubleThompson", "MaxInP", "MaxPairUCB", "MaxFirstUCBNext",
           "CoLSTIM", "GURO", "BALD", "UncertaintyAwareRB",
           "METHODS", "BASELINES", "ALL_METHODS", "BUILTIN", "NEEDS_PHI", "check_method", "register_policy",
           "unregister_policy", "registered_policies", "resolve_policy",
           "resolve_methods", "make_policy", "policy_provenance", "UnhashablePolicy", "policy_generator", "random_edge",
           "uniform_neighbour", "argmax_playable", "argmax_neighbour", "available", "pick", "stable_int", "ucb_width",
           "greedy_step", "warmup_choice", "warmup_rule"]
