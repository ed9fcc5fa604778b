"""The guard of :func:`study.check_policy`: a wrapper around a policy that hands it *copies* of
what it may read and compares them afterwards, validates each choice itself, watches the global
random generators around every call, and counts the steps at which the policy asked for Phi and
found it.  What it sees goes into a :class:`Record`, so that the check suite can name what went
wrong (:mod:`study.policies.checks`).
"""
from __future__ import annotations

import contextlib
import copy
import random
from dataclasses import dataclass, field

import numpy as np

from ..simulation.graph import ComparisonGraph
from .base import Step, is_flag, random_edge, unpack_choice
from .hooks import watching

# kinds of random generator a policy may not hold when it is built (it cannot know the replication's seed then)
GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator, random.Random)


@dataclass
class Record:
    """What the guards saw during the runs of one check: the first violation per check, and how
    often the policy asked for the debiased estimate and found Phi."""

    violations: dict = field(default_factory=dict)
    asked: int = 0
    available: int = 0

    def note(self, check, detail):
        self.violations.setdefault(check, detail)


def global_rng_state() -> tuple:
    """The state of the global generators a policy must not use: numpy's legacy ``np.random.*``
    and Python's ``random``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    return kind, keys.tobytes(), pos, has_gauss, gauss, random.getstate()


def rng_use(before: tuple, after: tuple) -> str:
    """Which global generator changed between two :func:`global_rng_state` (empty: none)."""
    used = []
    if before[:5] != after[:5]:
        used.append("numpy's global generator (np.random.seed / np.random.*)")
    if before[5] != after[5]:
        used.append("Python's random module")
    return " and ".join(used)


def _attributes(obj) -> list:
    """(name, value) of an object's instance attributes (``__dict__`` and slots)."""
    found = list(getattr(obj, "__dict__", {}).items())
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found.append((name, getattr(obj, name)))
    return found


def own_generators(policy, depth: int = 2) -> list:
    """The attribute paths (``"self.rng"``) of the random generators a freshly built policy holds
    (searched ``depth`` levels down its attributes and containers)."""
    found = []

    def scan(value, path, left):
        if isinstance(value, GENERATORS):
            found.append(path)
            return
        if left == 0 or isinstance(value, (str, bytes, np.ndarray, type)) or callable(value):
            return
        if isinstance(value, dict):
            items = [(f"[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"[{k}]", v) for k, v in enumerate(value)]
        else:
            items = [(f".{k}", v) for k, v in _attributes(value)]
        for suffix, item in items[:200]:
            scan(item, path + suffix, left - 1)

    scan(policy, "self", depth + 1)
    return found


def copy_graph(graph) -> ComparisonGraph:
    return ComparisonGraph.from_edges(np.array(graph.edges), graph.n_items)


def graph_arrays(graph) -> dict:
    arrays = {"graph.edges": graph.edges, "graph.adjacency": graph.adjacency, "graph.playable": graph.playable}
    arrays.update({f"graph.neighbours[{i}]": a for i, a in enumerate(graph.neighbours)})
    return arrays


class _GuardedDebias:
    """The step's debiased estimate, handed to the policy as a copy (made on first request)."""

    def __init__(self, step, record: Record):
        self.step, self.record, self.original, self.copy = step, record, None, None

    def __call__(self):
        if self.copy is None:
            self.original = self.step.debiased()
            self.copy = copy.deepcopy(self.original)
            self.record.asked += 1
            self.record.available += bool(self.original.available)
        return self.copy

    def arrays(self) -> dict:
        if self.copy is None:
            return {}
        return {f"step.debiased().{name}": (getattr(self.original, name), getattr(self.copy, name))
                for name in ("theta_d", "factor") if getattr(self.original, name, None) is not None}


def build(factory, setting, record: Record, watch=None, burn_in: int = 0):
    """``factory(setting)`` wrapped in a :class:`Guard`, the global generators watched around the
    call and the policy searched for generators of its own; with ``watch`` (a
    :class:`study.policies.hooks.Watch`) the audit hook checks the policy's calls in the factory,
    ``select`` and ``update``; ``burn_in``: see :class:`Guard`."""
    before = global_rng_state()
    with _watched(watch):
        policy = factory(setting)
    used = rng_use(before, global_rng_state())
    if used:
        record.note("different_draws", f"building the policy seeded or drew from {used}: every replication would get "
                                       "the same draws (a seed) or irreproducible ones; draw from step.rng")
    held = own_generators(policy)
    if held:
        record.note("different_draws", f"the policy holds a generator of its own when it is built ({', '.join(held)}): "
                                       "seeded there it cannot know the replication's seed (a constant gives every "
                                       "replication the same draws, the clock irreproducible ones); draw from step.rng")
    return Guard(policy, record, watch, burn_in)


def _watched(watch):
    return watching(watch) if watch is not None else contextlib.nullcontext()


class Guard:
    """Wraps a policy: each call gets a Step of copies, compared with the originals afterwards, the
    global generators are compared around it, and each choice is validated before the loop sees it.
    For the first ``burn_in`` steps the policy's choice is validated and then replaced by a random
    edge (the step's own uniforms), so that Phi exists for most of the run whatever the policy
    would have compared: the check then meets the policy's rule where Phi exists."""

    def __init__(self, policy, record: Record, watch=None, burn_in: int = 0):
        self.policy, self.record, self.watch, self.burn_in = policy, record, watch, burn_in
        self.source = self.graph = self.graph_arrays = None
        if callable(getattr(policy, "update", None)):
            self.update = self._update

    def _graph(self, step) -> ComparisonGraph:
        """The policy's copy of the step's graph, made once: its arrays are immutable, so a step
        only has to check that none was swapped for another (:meth:`_call`)."""
        if self.graph is None or step.graph is not self.source:
            self.source, self.graph = step.graph, copy_graph(step.graph)
            self.graph_arrays = graph_arrays(self.graph)
        return self.graph

    def _guarded(self, step):
        pristine = {"step.theta": np.array(step.theta), "step.x": np.array(step.x)}
        debiased = _GuardedDebias(step, self.record)
        theta, x = pristine["step.theta"].copy(), pristine["step.x"].copy()
        guarded = Step(step.t, x, step.uniforms, self._graph(step), theta, debiased, rng=step.rng,
                       setting=step.setting)
        return guarded, pristine, {"step.theta": theta, "step.x": x}, debiased

    def _swapped(self) -> str | None:
        """The name of a graph array the policy replaced in its copy (a frozen dataclass's field
        can still be set with ``object.__setattr__``), else None; the copy is then made again."""
        for name, array in graph_arrays(self.graph).items():
            if array is not self.graph_arrays.get(name):
                self.graph = None
                return name
        return None

    def _call(self, what, step, call):
        guarded, pristine, handed, debiased = self._guarded(step)
        before = global_rng_state()
        try:
            with _watched(self.watch):
                result = call(guarded)
        except ValueError as exc:
            if "read-only" in str(exc) or "WRITEABLE" in str(exc):
                self.record.note("no_writes", f"{what} at t={step.t} tried to write into a read-only array ({exc})")
            raise
        finally:
            used = rng_use(before, global_rng_state())
            if used:
                self.record.note("different_draws", f"{what} at t={step.t} seeded or drew from {used}; draw from "
                                                    "step.rng (seeded from the replication)")
        seen = {name: handed[name] for name in handed}
        seen["step.theta (as read again)"] = guarded.theta
        seen["step.x (as read again)"] = guarded.x
        for name, array in seen.items():
            base = pristine[name.split(" ")[0]]
            if np.shape(array) != np.shape(base) or not np.array_equal(array, base, equal_nan=True):
                self.record.note("no_writes", f"{what} at t={step.t} wrote into {name.split(' ')[0]}")
                break
        for name, (original, handed_copy) in debiased.arrays().items():
            if not np.array_equal(original, handed_copy, equal_nan=True):
                self.record.note("no_writes", f"{what} at t={step.t} wrote into {name}")
        swapped = self._swapped()
        if swapped is not None:
            self.record.note("no_writes", f"{what} at t={step.t} replaced {swapped} of the graph it was handed")
        return result

    def select(self, step):
        choice = self._call("select", step, self.policy.select)
        self._validate(choice, step)
        return random_edge(step) if step.t <= self.burn_in else choice

    def _update(self, step, choice, wins):
        return self._call("update", step, lambda guarded: self.policy.update(guarded, choice, wins))

    def _validate(self, choice, step):
        try:
            major, other, explored = unpack_choice(choice)
        except TypeError:
            self.record.note("returns_a_choice", f"select at t={step.t} returned {choice!r}, not "
                                                 "Choice(major, other, explored) with integer items")
            return
        if not is_flag(explored):
            self.record.note("explored_is_a_bool", f"select at t={step.t} returned explored={explored!r}, not a bool "
                                                   "(a string 'False' would be read as True)")
        n, graph = step.graph.n_items, step.graph
        if not (0 <= major < n and 0 <= other < n) or major == other or not graph.adjacency[major, other]:
            self.record.note("only_edges", f"select at t={step.t} returned ({major}, {other}), not an edge of the "
                                           f"graph (edges {np.asarray(graph.edges).tolist()})")
