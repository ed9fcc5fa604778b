"""``study.check_policy``: the policy contract as a check suite, as scikit-learn's
``check_estimator`` is for estimators.  Run it on a policy of one's own before a study.

Each check runs short replications of small settings through the real loop, with the policy
wrapped in a guard that hands it *copies* of what it may read (``step.theta``, ``step.x``, the
graph's arrays, the debiased estimate) and compares them afterwards, and that validates each
choice itself; so a check names what went wrong, and a policy under test never corrupts the
estimator of the run checking it.

====================  ==========================================================================
check                 passes when
====================  ==========================================================================
runs                  a 60-step replication of Setting A (T0 = 24, CIs every 10 steps) completes
returns_a_choice      every ``select`` returns ``(major, other, explored)`` with integer items
only_edges            every pair is an edge of the graph (items in range and distinct)
no_writes             ``select``/``update`` never write into ``step.theta``, ``step.x``, the graph's
                      arrays or the debiased estimate's arrays (a write that raises fails it too),
                      and the unguarded run equals the guarded one
deterministic         two runs with the same seed give the same trajectory (major, other, explored)
valid_before_phi      valid choices while Phi does not exist (Setting B, T = 30: Psi_t is singular
                      at every step), under every ``Setting.warmup``
disconnected_graph    valid choices on ``graph="raw"`` graphs with two components and with an
                      isolated item (Phi never exists; an isolated item is never compared)
picklable             the factory survives pickling (stdlib ``pickle``, else cloudpickle, as Ray
                      ships a registered factory to its workers) and the copy gives the same run
finishes_in_time      the 60-step run of ``runs`` takes at most ``time_limit`` seconds (default 10;
                      every built-in method takes under 0.1 s)
====================  ==========================================================================

A check that cannot run because the policy does not complete the first run is reported as
skipped, not failed, so that the failures name the cause.
"""
from __future__ import annotations

import copy
import operator
import pickle
import time
from dataclasses import dataclass, field

import numpy as np

from ..simulation.graph import ComparisonGraph
from ..simulation.replication import run_replication
from ..simulation.settings import SETTINGS, WARMUPS
from .base import Choice, Step
from .registry import resolve_policy

CHECKS = ("runs", "returns_a_choice", "only_edges", "no_writes", "deterministic", "valid_before_phi",
          "disconnected_graph", "picklable", "finishes_in_time")
_GUARDED = ("returns_a_choice", "only_edges", "no_writes")  # recorded by the guard on every run
_BASE = dict(T=60, T0=24, ci_every=10)
_BEFORE_PHI = dict(T=30, T0=10, ci_every=0)  # Setting B: 30 rows never identify (n-1)d = 90 parameters
_DISCONNECTED = ([(0, 1), (1, 2), (3, 4)], [(0, 1), (1, 2), (2, 3)])  # two components; item 4 isolated


@dataclass(frozen=True)
class CheckResult:
    """One check: ``status`` is ``"passed"``, ``"failed"`` or ``"skipped"``; ``detail`` says why."""

    name: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class PolicyCheckReport:
    """The outcome of :func:`check_policy`: one :class:`CheckResult` per check, in order.

    Attributes
    ----------
    policy : str
        The policy checked (its factory's name).
    results : tuple of CheckResult
        One per check of :data:`CHECKS`.
    seconds : float
        Wall time of the whole suite.
    """

    policy: str
    results: tuple
    seconds: float

    @property
    def failed(self) -> list:
        """Names of the failed checks."""
        return [r.name for r in self.results if r.status == "failed"]

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks only follow a failure)."""
        return not self.failed and all(r.status == "passed" for r in self.results)

    def __getitem__(self, name) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"check_policy({self.policy}): {sum(r.status == 'passed' for r in self.results)} of "
                 f"{len(self.results)} checks passed ({self.seconds:.2f} s)"]
        lines += [f"  {r.status:<7} {r.name}" + (f": {r.detail}" if r.detail else "") for r in self.results]
        return "\n".join(lines)


class PolicyCheckError(AssertionError):
    """Raised by :func:`check_policy` when a check fails; ``report`` holds every result and the
    message names each failed check."""

    def __init__(self, report: PolicyCheckReport):
        self.report = report
        failed = [report[name] for name in report.failed]
        super().__init__(f"policy {report.policy} failed {len(failed)} check(s): "
                         + "; ".join(f"{r.name} ({r.detail})" for r in failed) + "\n" + str(report))


@dataclass
class _Record:
    """What the guards saw during the runs of one check: the first violation per guarded check."""

    violations: dict = field(default_factory=dict)

    def note(self, check, detail):
        self.violations.setdefault(check, detail)


def _copy_graph(graph) -> ComparisonGraph:
    return ComparisonGraph.from_edges(np.array(graph.edges), graph.n_items)


def _graph_arrays(graph) -> dict:
    arrays = {"graph.edges": graph.edges, "graph.adjacency": graph.adjacency, "graph.playable": graph.playable}
    arrays.update({f"graph.neighbours[{i}]": a for i, a in enumerate(graph.neighbours)})
    return arrays


class _GuardedDebias:
    """The step's debiased estimate, handed to the policy as a copy (made on first request)."""

    def __init__(self, step):
        self.step, self.original, self.copy = step, None, None

    def __call__(self):
        if self.copy is None:
            self.original = self.step.debiased()
            self.copy = copy.deepcopy(self.original)
        return self.copy

    def arrays(self) -> dict:
        if self.copy is None:
            return {}
        return {f"step.debiased().{name}": (getattr(self.original, name), getattr(self.copy, name))
                for name in ("theta_d", "factor") if getattr(self.original, name, None) is not None}


class _Guard:
    """Wraps a policy: each call gets a Step of copies, compared with the originals afterwards, and
    each choice is validated before the loop sees it."""

    def __init__(self, policy, record: _Record):
        self.policy, self.record = policy, record
        if callable(getattr(policy, "update", None)):
            self.update = self._update

    def _guarded(self, step):
        pristine = {"step.theta": np.array(step.theta), "step.x": np.array(step.x)}
        pristine.update({k: np.array(v) for k, v in _graph_arrays(step.graph).items()})
        debiased = _GuardedDebias(step)
        theta, x, graph = pristine["step.theta"].copy(), pristine["step.x"].copy(), _copy_graph(step.graph)
        guarded = Step(step.t, x, step.uniforms, graph, theta, debiased, rng=step.rng, setting=step.setting)
        return guarded, pristine, {"step.theta": theta, "step.x": x, **_graph_arrays(graph)}, debiased

    def _call(self, what, step, call):
        guarded, pristine, handed, debiased = self._guarded(step)
        try:
            result = call(guarded)
        except ValueError as exc:
            if "read-only" in str(exc) or "WRITEABLE" in str(exc):
                self.record.note("no_writes", f"{what} at t={step.t} tried to write into a read-only array ({exc})")
            raise
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
        return result

    def select(self, step):
        choice = self._call("select", step, self.policy.select)
        self._validate(choice, step)
        return choice

    def _update(self, step, choice, wins):
        return self._call("update", step, lambda guarded: self.policy.update(guarded, choice, wins))

    def _validate(self, choice, step):
        try:
            major, other, explored = choice
            major, other = operator.index(major), operator.index(other)
        except (TypeError, ValueError):
            self.record.note("returns_a_choice", f"select at t={step.t} returned {choice!r}, not "
                                                 "Choice(major, other, explored) with integer items")
            return
        n, graph = step.graph.n_items, step.graph
        if not (0 <= major < n and 0 <= other < n) or major == other or not graph.adjacency[major, other]:
            self.record.note("only_edges", f"select at t={step.t} returned ({major}, {other}), not an edge of the "
                                           f"graph (edges {np.asarray(graph.edges).tolist()})")


def _trajectory(result) -> tuple:
    return tuple(np.asarray(result.trajectory[c]).tolist() for c in ("major", "other", "explored"))


def _dumps(factory):
    """(pickled bytes, loads) with stdlib pickle, else cloudpickle (how Ray ships a factory)."""
    try:
        return pickle.dumps(factory), pickle.loads
    except Exception as first:  # noqa: BLE001 -- try the serializer Ray uses
        try:
            import cloudpickle
        except ImportError:
            try:
                from ray import cloudpickle
            except ImportError:
                raise first from None
        return cloudpickle.dumps(factory), cloudpickle.loads


class _Suite:
    def __init__(self, factory, name, seed, time_limit):
        self.factory, self.name, self.seed, self.time_limit = factory, name, seed, time_limit
        self.results = {}

    def run(self, setting, record, factory=None, guarded=True, **overrides):
        factory = self.factory if factory is None else factory
        policy = (lambda s: _Guard(factory(s), record)) if guarded else factory
        return run_replication(setting, self.name, self.seed, policy=policy, **overrides)

    def set(self, name, passed, detail=""):
        self.results[name] = CheckResult(name, "passed" if passed else "failed", "" if passed else detail)

    def guarded_scenario(self, name, runs) -> None:
        """Run ``runs`` [(setting, overrides)]: the check fails on an invalid choice or an error; a
        write seen there is a failure of ``no_writes``."""
        record = _Record()
        error = None
        for setting, overrides in runs:
            try:
                self.run(setting, record, **overrides)
            except Exception as exc:  # noqa: BLE001 -- reported by name
                shown = {k: v for k, v in overrides.items() if k in ("T", "warmup", "graph", "edges")}
                error = f"Setting {setting} with {shown}: {type(exc).__name__}: {exc}"
                break
        writes = record.violations.pop("no_writes", None)
        if writes is not None and self.results["no_writes"].status == "passed":
            self.set("no_writes", False, writes)
        invalid = "; ".join(record.violations.values())
        self.set(name, not invalid and error is None, invalid or error or "")

    def execute(self):
        record = _Record()
        start = time.perf_counter()
        try:
            base = self.run("A", record, **_BASE)
            error = None
        except Exception as exc:  # noqa: BLE001
            base, error = None, f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - start
        for check in _GUARDED:
            self.set(check, check not in record.violations, record.violations.get(check, ""))
        stopped = next((v for k, v in record.violations.items() if k != "no_writes"), None)
        self.set("runs", base is not None, f"the run stopped: {stopped}" if stopped else (error or ""))
        if base is None:
            skip = "skipped: the policy does not complete the 60-step run of 'runs'"
            for check in CHECKS:
                self.results.setdefault(check, CheckResult(check, "skipped", skip))
            return
        self.set("finishes_in_time", elapsed <= self.time_limit,
                 f"the 60-step run of Setting A took {elapsed:.2f} s, more than time_limit={self.time_limit} s")
        twice = self._again()
        self.set("deterministic", twice is not None and _trajectory(twice) == _trajectory(base),
                 "two runs with the same seed chose different pairs (randomness that is not step.rng's or "
                 "state kept across replications)" if twice is not None else "the second run failed")
        if self.results["deterministic"].status == "passed" and "no_writes" not in record.violations:
            self._plain_run(base)
        self.guarded_scenario("valid_before_phi", [("B", {**_BEFORE_PHI, "warmup": w}) for w in WARMUPS])
        self.guarded_scenario("disconnected_graph", [("A", dict(T=30, T0=10, ci_every=10, graph="raw", edges=e))
                                                     for e in _DISCONNECTED])
        self._pickle(base)

    def _again(self):
        try:
            return self.run("A", _Record(), **_BASE)
        except Exception:  # noqa: BLE001
            return None

    def _plain_run(self, base):
        """The unguarded run must equal the guarded one: a policy whose writes reach the shared
        state changes its own run."""
        try:
            plain = self.run("A", None, guarded=False, **_BASE)
        except Exception as exc:  # noqa: BLE001 -- the guarded run completed, so its writes did this
            written = "read-only" in str(exc) or "WRITEABLE" in str(exc)
            self.set("no_writes", False, f"a write into a read-only array raised: {exc}" if written else
                     f"its unguarded run fails ({type(exc).__name__}: {exc}) where the guarded one completes: "
                     "it writes into the shared state")
            return
        if _trajectory(plain) != _trajectory(base):
            self.set("no_writes", False, "its unguarded run differs from the guarded one: it writes into the shared "
                                         f"state (R(T) {plain.final_regret:.4f} vs {base.final_regret:.4f})")

    def _pickle(self, base):
        try:
            data, loads = _dumps(self.factory)
            twin = loads(data)
            again = self.run("A", _Record(), factory=twin, **_BASE)
        except Exception as exc:  # noqa: BLE001
            self.set("picklable", False, f"{type(exc).__name__}: {exc}")
            return
        comparable = self.results["deterministic"].status == "passed"  # else no run repeats itself
        self.set("picklable", not comparable or _trajectory(again) == _trajectory(base),
                 "the unpickled factory gives a different run")


def check_policy(factory, *, name: str = "checked-policy", seed: int = 3, time_limit: float = 10.0,
                 raise_on_failure: bool = True) -> PolicyCheckReport:
    """Check that a policy keeps the contract of :class:`study.Policy` (the checks are listed in
    :mod:`study.policies.checks`).

    Parameters
    ----------
    factory : callable or str
        The policy's factory (a class or callable taking a :class:`study.Setting`), or a method
        name (built-in, registered, or ``"package.module:Name"``).
    name : str
        The label of the runs (it keys the policy's private generator).
    seed : int
        The environment seed of every run.
    time_limit : float
        Seconds allowed for a 60-step run of Setting A.
    raise_on_failure : bool
        Raise :class:`PolicyCheckError` (an ``AssertionError`` naming every failed check) when a
        check fails; otherwise return the report.

    Returns
    -------
    PolicyCheckReport

    Examples
    --------
    >>> import study
    >>> report = study.check_policy("RB")
    >>> report.passed, report.failed
    (True, [])
    """
    if isinstance(factory, str):
        name, factory = factory, resolve_policy(factory)
    if not callable(factory):
        raise ValueError(f"factory must be a class or callable taking a Setting (or a method name), got {factory!r}")
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    label = getattr(factory, "__qualname__", None) or repr(factory)
    start = time.perf_counter()
    suite = _Suite(factory, name, int(seed), float(time_limit))
    suite.execute()
    report = PolicyCheckReport(policy=label, results=tuple(suite.results[c] for c in CHECKS),
                               seconds=time.perf_counter() - start)
    if raise_on_failure and report.failed:
        raise PolicyCheckError(report)
    return report


__all__ = ["CHECKS", "CheckResult", "PolicyCheckError", "PolicyCheckReport", "check_policy"]
