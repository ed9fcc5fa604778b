"""Contestants that reach outside what they are handed (issue 35), for the runner's tests."""
import os
import sys

from study.policies import argmax_playable, random_edge, uniform_neighbour
from study import Choice


class PlantsFiles:
    """Writes a forged part into directory ``target`` (a policy found --out through /proc and could
    write there)."""

    def __init__(self, setting, target="."):
        self.target = target

    def select(self, step):
        with open(os.path.join(self.target, f"part-forged-{step.t}.parquet"), "wb") as handle:
            handle.write(b"forged")
        return random_edge(step)


class CatchesAndReads:
    """Reads theta* off the stack; swallows the refusal and carries on greedily."""

    def __init__(self, setting):
        pass

    def select(self, step):
        try:
            frame = sys._getframe(1)
            while frame is not None and "env" not in frame.f_locals:
                frame = frame.f_back
        except PermissionError:
            pass
        major = argmax_playable(step, step.theta @ step.x)
        return Choice(major, uniform_neighbour(step, major), False)


class DeclaresFiles(PlantsFiles):
    policy_needs = ("files",)
