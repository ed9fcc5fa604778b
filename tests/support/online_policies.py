"""Policies with a state of their own, for tests/online/test_online_resume.py: greedy on theta, with
the ties broken by a count the policy keeps in ``update`` (how often each item lost), so that the
choices depend on the policy's state as well as on the estimate.  ``Counting`` has no
``state_dict``: a reopened ranker rebuilds its count by refitting the history; ``CountingSaved``
saves and restores it with the checkpoint."""
from __future__ import annotations

import numpy as np

from study.policies import Choice, argmax_playable, uniform_neighbour


class Counting:
    def __init__(self, setting):
        self.losses = [0.0] * setting.n_items

    def select(self, step):
        scores = np.round(step.theta @ step.x, 1) - 1e-3 * np.asarray(self.losses)
        major = argmax_playable(step, scores)
        return Choice(major, uniform_neighbour(step, major), False)

    def update(self, step, choice, wins):
        self.losses[choice.major] += wins
        self.losses[choice.other] += step.setting.M - wins


class CountingSaved(Counting):
    def state_dict(self):
        return {"losses": list(self.losses)}

    def load_state_dict(self, state):
        self.losses = [float(v) for v in state["losses"]]
