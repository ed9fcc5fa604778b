"""Votes to a decision: how many votes each pair-choice method needs until the stopping rule
decides the top k, on replayed and simulated arenas, and the error it pays.

:mod:`.arenas` defines the arenas (:data:`ARENAS`), :mod:`.rules` the methods that are not
registered policies, :mod:`.engine` the replay (:func:`replay`) and :mod:`.budgets` the study's
sizes (:func:`default_budget`, :func:`default_reps`).
"""
from .arenas import ARENAS, check_arena
from .budgets import default_budget, default_reps
from .engine import LEVEL, METHODS, TOPS, VotesRun, check_method, replay

__all__ = ["ARENAS", "METHODS", "TOPS", "LEVEL", "default_budget", "default_reps", "check_arena", "check_method",
           "replay", "VotesRun"]
