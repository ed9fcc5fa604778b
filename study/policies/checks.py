"""``study.check_policy``: the policy contract as a check suite, as scikit-learn's
``check_estimator`` is for estimators.  Run it on a policy of one's own before a study.

Each check runs short replications of small settings through the real loop, with the policy
wrapped in a guard (:mod:`study.policies.guard`) that hands it *copies* of what it may read
(``step.theta``, ``step.x``, the graph's arrays, the debiased estimate) and compares them
afterwards, validates each choice itself and watches the global random generators around every
call; so a check names what went wrong, and a policy under test never corrupts the estimator of
the run checking it.  The runs reach every branch a policy has: before Phi exists, once it exists
(for a good part of the run, under every warm-up, on two settings), and on disconnected graphs.

====================  ==========================================================================
check                 passes when
====================  ==========================================================================
runs                  a 60-step replication of Setting A (T0 = 24, CIs every 10 steps) completes
returns_a_choice      every ``select`` returns ``(major, other, explored)`` with integer items
explored_is_a_bool    every choice's ``explored`` is a bool (``"False"`` would be stored as True)
only_edges            every pair is an edge of the graph (items in range and distinct)
no_writes             ``select``/``update`` never write into ``step.theta``, ``step.x``, the graph's
                      arrays or the debiased estimate's arrays (a write that raises fails it too),
                      and the unguarded run equals the guarded one
deterministic         two runs with the same seed give the same trajectory (major, other,
                      explored): the 60-step run and a 120-step run in which Phi exists
different_draws       replications of different seeds do not share the policy's draws: no call
                      (building the policy, ``select``, ``update``) seeds or draws from a global
                      generator (numpy's ``np.random.*``, Python's ``random``), and the policy holds
                      no generator of its own when it is built (seeded there, it cannot know the
                      replication's seed: a constant or the clock); randomness comes from step.rng
shared_state          two seeds of the 120-step run, each run in a fresh process, give the same
                      trajectories as here, where each runs after the other (both orders): no
                      state is kept across replications (a module-level cache, a class attribute)
valid_before_phi      valid choices while Phi does not exist (Setting B, T = 30: Psi_t is singular
                      at every step), under every ``Setting.warmup``
valid_with_phi        valid choices once Phi exists: Setting A at T = 120 (T0 = 48; seed s + 1
                      under every ``Setting.warmup``, seed s under "own"; Phi exists from
                      t ~ 50-70), a 4-item complete-graph setting (T = 60; Phi from t ~ 10) and an
                      8-item ring (a sparse graph: 8 of the 28 pairs are edges; T = 60; the policy's
                      first 20 choices are validated and replaced by random edges, so Phi exists
                      from t ~ 15 whatever it chooses, and most steps at which it could return a
                      non-edge have Phi), each under every warm-up; its detail says at how many of the steps at which
                      the policy asked for Phi it existed
disconnected_graph    valid choices on ``graph="raw"`` graphs with two components and with an
                      isolated item (Phi never exists; an isolated item is never compared)
picklable             the factory survives pickling (stdlib ``pickle``, else cloudpickle, as Ray
                      ships a registered factory to its workers) and the copy gives the same run
finishes_in_time      the 60-step run of ``runs`` takes at most ``time_limit`` seconds (default 10;
                      every built-in method takes under 0.1 s)
no_forbidden_calls    the policy's own code never writes files, starts processes, opens sockets,
                      walks the interpreter's stack or the garbage collector's objects (the audit
                      hooks of :mod:`study.policies.hooks`, which refuse such calls with an error
                      naming the policy), unless its factory declares the need in ``policy_needs``
====================  ==========================================================================

A check that needs the first run is reported as skipped when the policy does not complete it,
so that the failures name the cause; the scenarios (``valid_before_phi``, ``valid_with_phi``,
``disconnected_graph``) run regardless, and what the guard sees in them (a non-edge, a bad
choice, a write, a global generator, a refused call) fails the check named for it as well as the
scenario's own.  ``shared_state`` is skipped for a factory that cannot be
pickled (``picklable`` fails).

*Confinement and whose verdict.*  A user policy's suite runs in a process of its own, confined by
the kernel as a study's user policies are (:mod:`study.policies.confine`: writes only to a private
scratch directory, no processes, no sockets), and what comes back is JSON of the results (never a
pickle).  That process runs the policy's code, so its results are *self-reported*: the calling
process runs the suite's replications again with the loop here and the policy behind the channel
of :mod:`study.policies.sandbox`, judges every check it can from what came back
(:mod:`study.policies.verdict`), and a check passes only where both sides passed.  The report says
which confinement applied (:attr:`PolicyCheckReport.confinement`) and which checks' passes are
self-reported (:attr:`PolicyCheckReport.self_reported`).  A built-in method, and a factory that
cannot be pickled, are checked in the calling process.
"""
from __future__ import annotations

import pickle
import time
from dataclasses import dataclass

import numpy as np

from ..simulation.replication import run_replication
from ..simulation.settings import WARMUPS, Setting
from . import fresh, hooks
from .guard import Record, build
from .registry import ALL_METHODS, resolve_policy
from .verdict import DETERMINISTIC, GLOBAL_SEEDS, SELF_REPORTED, channel_run, combined, confinement_of
from .verdict import channel_runs_in_one_process as _in_one_process, one_line as _error

CHECKS = ("runs", "returns_a_choice", "explored_is_a_bool", "only_edges", "no_writes", "deterministic",
          "different_draws", "shared_state", "valid_before_phi", "valid_with_phi", "disconnected_graph", "picklable",
          "finishes_in_time", "no_forbidden_calls")
# recorded by the guard on every run (in the scenarios they fail the scenario's own check too)
_GUARDED = ("returns_a_choice", "explored_is_a_bool", "only_edges", "no_writes", "different_draws",
            "no_forbidden_calls")
_OWN_CHECK = ("no_writes", "different_draws", "no_forbidden_calls")  # not a scenario's failure by themselves
_BASE = dict(T=60, T0=24, ci_every=10)
# Setting A: Phi exists from t ~ 50-70 (seeds 3, 4; under the greedy warm-up seed 4's does, seed 3's
# never), so that the branch a policy takes once Phi exists decides about half of the steps
_WITH_PHI = dict(T=120, T0=48, ci_every=10)
# four items, a complete graph, 9 free parameters: Phi exists from t ~ 10, under every warm-up
SMALL = Setting(name="check-small", n_items=4, dim=3, T=60, T0=24, M=20, p=1.0, truth="normal", init_mean=0.0,
                ci_every=10)
# eight items on a ring (8 of 28 pairs are edges), 14 free parameters: with random edges for its first steps
# Phi exists from t ~ 15 whatever the policy does, so a policy that returns a non-edge once Phi exists has
# most of the run to do it
SPARSE = Setting(name="check-ring", n_items=8, dim=2, T=60, T0=24, M=20, p=1.0, truth="normal", init_mean=0.0,
                 ci_every=10, graph="raw", edges=tuple((k, (k + 1) % 8) for k in range(8)))
SPARSE_BURN_IN = 20  # its first steps compare random edges whatever the policy chose (validated): Phi from t ~ 15
_BEFORE_PHI = dict(T=30, T0=10, ci_every=0)  # Setting B: 30 rows never identify (n-1)d = 90 parameters
_DISCONNECTED = ([(0, 1), (1, 2), (3, 4)], [(0, 1), (1, 2), (2, 3)])  # two components; item 4 isolated
_FRESH_SECONDS = 120.0  # a fresh process's run (it starts from a fork of a preloaded server)


@dataclass(frozen=True)
class CheckResult:
    """One check: ``status`` is ``"passed"``, ``"failed"`` or ``"skipped"``; ``detail`` says why
    (or, for a passed check, what it saw)."""

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
    confinement : str
        Where the checks ran: a process confined by the kernel (which Landlock ABI, which
        libseccomp), a process of their own without it, or this process (and why).
    self_reported : tuple of str
        The checks whose pass rests on what the process running the policy reported (its code could
        have forged it; :mod:`study.policies.verdict`): empty where the suite ran in this process.
        Every other check of a user policy was judged here, from what came back through the channel.
    """

    policy: str
    results: tuple
    seconds: float
    confinement: str = ""
    self_reported: tuple = ()

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
        if self.self_reported:
            lines.append(f"  self-reported (judged in the policy's process only): {', '.join(self.self_reported)}")
        return "\n".join(lines + ([f"  confinement: {self.confinement}"] if self.confinement else []))


class PolicyCheckError(AssertionError):
    """Raised by :func:`check_policy` when a check fails; ``report`` holds every result and the
    message names each failed check."""

    def __init__(self, report: PolicyCheckReport):
        self.report = report
        failed = [report[name] for name in report.failed]
        super().__init__(f"policy {report.policy} failed {len(failed)} check(s): "
                         + "; ".join(f"{r.name} ({r.detail})" for r in failed) + "\n" + str(report))


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


def _watch(label, factory, record):
    """The audit hook's watch of the policy under check, its refusals noted in ``record``."""
    return hooks.watch_for(label, factory, on_refusal=lambda need, message: record.note("no_forbidden_calls", message))


def _run(setting, name, seed, factory, record, guarded=True, label=None, burn_in=0, **overrides):
    if guarded:
        watch = _watch(label or name, factory, record)
        return run_replication(setting, name, seed, policy=lambda s: build(factory, s, record, watch, burn_in),
                               **overrides)
    with hooks.watching(_watch(label or name, factory, Record() if record is None else record)):
        return run_replication(setting, name, seed, policy=factory, **overrides)


def fresh_trajectory(factory, name, seed, label=None) -> tuple:
    """In a fresh process: the trajectory of the ``shared_state`` run of ``seed`` (guarded, as here,
    under the audit hook for the rest of the process)."""
    hooks.install_for_process(hooks.watch_for(label or name, factory))
    return _trajectory(_run("A", name, seed, factory, Record(), **_WITH_PHI))


def _shared_state_verdict(seeds, alone: dict, after: dict, where: str) -> CheckResult:
    """``shared_state``: each seed's trajectory alone in a fresh process (``alone``) against the
    same seed's run right after the other seed's, in one process (``after``, ``where``)."""
    for seed in seeds:
        if alone[seed] != after[seed]:
            step = next(t for t, pair in enumerate(zip(*alone[seed]), 1) if pair != tuple(zip(*after[seed]))[t - 1])
            return CheckResult("shared_state", "failed", f"seed {seed} chose differently after the other seed's run "
                               f"{where} than alone in a fresh one (first at t={step}): the policy keeps state across "
                               "replications (a module-level or class-level cache?), so results would depend on how "
                               "replications are batched")
    return CheckResult("shared_state", "passed")


def _shown(overrides) -> dict:
    return {k: v for k, v in overrides.items() if k in ("T", "warmup", "graph", "edges")}


class _Suite:
    def __init__(self, factory, name, seed, time_limit, label=None):
        self.factory, self.name, self.seed, self.time_limit = factory, name, seed, time_limit
        self.label = label or name
        self.seeds = (seed, seed + 1)
        self.results, self.phi_runs, self.fresh = {}, {}, None
        self.deferred = False  # in a confined process: shared_state's fresh runs are the caller's

    def run(self, setting, record, factory=None, guarded=True, seed=None, **overrides):
        return _run(setting, self.name, self.seed if seed is None else seed, self.factory if factory is None else factory,
                    record, guarded, label=self.label, **overrides)

    def set(self, name, passed, detail="", note=""):
        self.results[name] = CheckResult(name, "passed" if passed else "failed", note if passed else detail)

    def fail_once(self, name, detail):
        """Fail check ``name`` with ``detail`` unless it has failed already."""
        if name not in self.results or self.results[name].status == "passed":
            self.set(name, False, detail)

    def guarded_scenario(self, name, runs, keep=None) -> Record:
        """Run ``runs`` [(setting, overrides)]: the check fails on an invalid choice or an error; a
        write seen there is a failure of ``no_writes``, a global generator's use one of
        ``different_draws``.  ``keep``: {index: key} of runs whose results are kept in ``phi_runs``."""
        record = Record()
        error = written = None
        for k, (setting, overrides) in enumerate(runs):
            try:
                result = self.run(setting, record, **overrides)
            except Exception as exc:  # noqa: BLE001 -- reported by name
                label = setting if isinstance(setting, str) else setting.name
                error = f"Setting {label} with {_shown(overrides)}: {_error(exc)}"
                written = "no_writes" in record.violations and ("read-only" in str(exc) or "WRITEABLE" in str(exc))
                break
            if keep and k in keep:
                self.phi_runs[keep[k]] = _trajectory(result)
        for check in _GUARDED:
            detail = (record.violations.pop if check in _OWN_CHECK else record.violations.get)(check, None)
            if detail is not None:
                self.fail_once(check, detail)
        invalid = "; ".join(record.violations.values())
        if written and not invalid:  # stopped by its write, which no_writes names: nothing else to say here
            self.results[name] = CheckResult(name, "skipped", f"skipped: a write into a read-only array stopped "
                                                              f"the run ({error}; see no_writes)")
            return record
        self.set(name, not invalid and error is None, invalid or error or "")
        return record

    def execute(self):
        self.start_fresh()
        try:
            self._execute()
        finally:
            if isinstance(self.fresh, fresh.FreshRuns):  # not collected (an error): release the fresh processes
                self.fresh.outcomes()

    def _execute(self):
        record = Record()
        start = time.perf_counter()
        try:
            base = self.run("A", record, **_BASE)
            error = None
        except Exception as exc:  # noqa: BLE001
            base, error = None, _error(exc)
        elapsed = time.perf_counter() - start
        for check in _GUARDED:
            self.set(check, check not in record.violations, record.violations.get(check, ""))
        stopped = next((v for k, v in record.violations.items() if k not in _OWN_CHECK), None)
        self.set("runs", base is not None, f"the run stopped: {stopped}" if stopped else (error or ""))
        self.scenarios()
        if base is None:
            skip = "skipped: the policy does not complete the 60-step run of 'runs'"
            for check in CHECKS:
                self.results.setdefault(check, CheckResult(check, "skipped", skip))
            return
        self.set("finishes_in_time", elapsed <= self.time_limit,
                 f"the 60-step run of Setting A took {elapsed:.2f} s, more than time_limit={self.time_limit} s")
        self._deterministic(base)
        if self.results["deterministic"].status == "passed" and "no_writes" not in record.violations:
            self._plain_run(base)
        self._pickle(base)
        self._shared_state()

    def scenarios(self):
        """The scenarios that need no first run: before Phi, with Phi, on disconnected graphs."""
        self.guarded_scenario("valid_before_phi", [("B", {**_BEFORE_PHI, "warmup": w}) for w in WARMUPS])
        first, second = self.seeds  # the first seed under its own warm-up only (shared_state needs two seeds)
        with_phi = [("A", {**_WITH_PHI, "seed": first, "warmup": "own"})]
        with_phi += [("A", {**_WITH_PHI, "seed": second, "warmup": w}) for w in WARMUPS]
        with_phi += [(SMALL, {"seed": first, "warmup": w}) for w in WARMUPS]
        with_phi += [(SPARSE, {"seed": first, "warmup": w, "burn_in": SPARSE_BURN_IN}) for w in WARMUPS]
        record = self.guarded_scenario("valid_with_phi", with_phi, keep={0: first, 1: second})
        if self.results["valid_with_phi"].status == "passed":
            note = (f"Phi existed at {record.available} of the {record.asked} steps at which the policy asked for it"
                    if record.asked else "the policy never asked for Phi")
            self.set("valid_with_phi", True, note=note)
        self.guarded_scenario("disconnected_graph", [("A", dict(T=30, T0=10, ci_every=10, graph="raw", edges=e))
                                                     for e in _DISCONNECTED])

    def _deterministic(self, base):
        """The 60-step run again, and the 120-step run of the first seed again (right after the
        second seed's: the first of the two orders of ``shared_state``)."""
        detail = ("two runs with the same seed chose different pairs (randomness that is not step.rng's, or state "
                  "kept across replications)")
        try:
            twice = self.run("A", Record(), **_BASE)
        except Exception:  # noqa: BLE001
            self.set("deterministic", False, "the second run failed")
            return
        if _trajectory(twice) != _trajectory(base):
            self.set("deterministic", False, detail + " in the 60-step run of Setting A")
            return
        first = self.phi_runs.get(self.seeds[0])
        if first is None:  # valid_with_phi failed: its runs are not there to repeat
            self.set("deterministic", True)
            return
        try:
            again = self.run("A", Record(), seed=self.seeds[0], **_WITH_PHI)
        except Exception as exc:  # noqa: BLE001
            self.set("deterministic", False, f"the second 120-step run failed ({_error(exc)})")
            return
        self.phi_runs["again"] = _trajectory(again)
        self.set("deterministic", self.phi_runs["again"] == first, detail + " in the 120-step run of Setting A, where "
                                                                         "Phi exists")

    def start_fresh(self):
        """Send the two seeds of the 120-step run to fresh processes (collected by
        :meth:`_shared_state`; they run while this process runs the other checks)."""
        if self.deferred:
            return
        try:
            packed = fresh.dumps(self.factory)
        except Exception as exc:  # noqa: BLE001
            self.fresh = f"skipped: the factory cannot be pickled for a fresh process ({_error(exc)})"
            return
        self.fresh = fresh.FreshRuns(packed, fresh_trajectory, [(self.name, s, self.label) for s in self.seeds],
                                     _FRESH_SECONDS)

    def _shared_state(self):
        """Each seed of the 120-step run in a fresh process against its runs here: the first seed's
        run after the second's, the second's after the first's."""
        if self.deferred:
            return
        pending, self.fresh = self.fresh, None
        outcomes = pending.outcomes() if hasattr(pending, "outcomes") else None
        here = {self.seeds[0]: self.phi_runs.get("again"), self.seeds[1]: self.phi_runs.get(self.seeds[1])}
        if outcomes is None or any(v is None for v in here.values()):
            reason = pending if isinstance(pending, str) else ("skipped: the 120-step runs of valid_with_phi and "
                                                               "deterministic did not complete")
            self.results["shared_state"] = CheckResult("shared_state", "skipped", reason)
            return
        for seed, (status, value) in zip(self.seeds, outcomes):
            if status != "ok":
                self.set("shared_state", False, f"seed {seed} in a fresh process: {value}")
                return
        self.results["shared_state"] = _shared_state_verdict(self.seeds, {s: v for s, (_, v) in zip(self.seeds, outcomes)},
                                                             here, "in this process")

    def _plain_run(self, base):
        """The unguarded run must equal the guarded one: a policy whose writes reach the shared
        state changes its own run."""
        try:
            plain = self.run("A", None, guarded=False, **_BASE)
        except hooks.PolicyRefused as exc:
            self.fail_once("no_forbidden_calls", str(exc))
            return
        except Exception as exc:  # noqa: BLE001 -- the guarded run completed, so its writes did this
            written = "read-only" in str(exc) or "WRITEABLE" in str(exc)
            self.set("no_writes", False, f"a write into a read-only array raised: {exc}" if written else
                     f"its unguarded run fails ({_error(exc)}) where the guarded one completes: "
                     "it writes into the shared state")
            return
        if _trajectory(plain) != _trajectory(base):
            self.set("no_writes", False, "its unguarded run differs from the guarded one: it writes into the shared "
                                         f"state (R(T) {plain.final_regret:.4f} vs {base.final_regret:.4f})")

    def _pickle(self, base):
        try:
            data, loads = _dumps(self.factory)
            twin = loads(data)
            again = self.run("A", Record(), factory=twin, **_BASE)
        except Exception as exc:  # noqa: BLE001
            self.set("picklable", False, _error(exc))
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
        The environment seed of every run (the 120-step runs of ``valid_with_phi`` and
        ``shared_state`` also use ``seed + 1``).
    time_limit : float
        Seconds allowed for the 60-step run of Setting A.
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
    suite = _Suite(factory, name, int(seed), float(time_limit), label=label)
    where = _confined_checks(suite) if name not in ALL_METHODS else "none: a built-in method, checked in this process"
    if where.startswith("none"):
        suite.execute()
    report = PolicyCheckReport(policy=label, results=tuple(suite.results[c] for c in CHECKS),
                               seconds=time.perf_counter() - start, confinement=where,
                               self_reported=() if where.startswith("none") else SELF_REPORTED)
    if raise_on_failure and report.failed:
        raise PolicyCheckError(report)
    return report


def _in_confinement(factory, kind, name, seed, time_limit, label):
    """In a confined process: the suite but ``shared_state``, as plain data (JSON crosses back,
    never a pickle).  What it returns is self-reported (:mod:`study.policies.verdict`)."""
    suite = _Suite(factory, name, seed, time_limit, label=label)
    suite.deferred = True
    suite.execute()
    return {"results": [[r.name, r.status, r.detail] for r in suite.results.values()],
            "again": suite.phi_runs.get("again"), "second": suite.phi_runs.get(seed + 1)}


def _trajectory_of(value):
    """A trajectory (three lists of ints and bools) from a confined process's JSON, else None."""
    if (isinstance(value, list) and len(value) == 3 and all(isinstance(c, list) for c in value)
            and all(isinstance(v, (int, bool)) for c in value for v in c)):
        return tuple(value)
    return None


class _Outcomes:
    def __init__(self, outcomes):
        self.result = outcomes

    def outcomes(self):
        return self.result


class _TrustedSuite(_Suite):
    """The suite's replications with the loop in this process and the policy behind the channel
    (:func:`study.policies.verdict.channel_run`), one confined process per replication."""

    def __init__(self, suite: _Suite, factory_bytes: tuple, needs):
        super().__init__(suite.factory, suite.name, suite.seed, suite.time_limit, label=suite.label)
        self.deferred = True  # shared_state: _confined_checks
        self.factory_bytes, self.needs = factory_bytes, tuple(needs)
        self.seconds = 60.0 + 20 * suite.time_limit  # a replication's limit: a hung policy is ended
        self.runs = 0

    def run(self, setting, record, factory=None, guarded=True, seed=None, **overrides):
        self.runs += 1  # each run's process gets global generators of its own (verdict.GLOBAL_SEEDS)
        return channel_run(setting, self.name, self.seed if seed is None else seed, self.factory_bytes, self.needs,
                           self.seconds, record, guarded, global_seed=self.runs * GLOBAL_SEEDS + self.seed,
                           **overrides)

    def _deterministic(self, base):
        super()._deterministic(base)
        result = self.results["deterministic"]
        if result.status == "failed":
            self.results["deterministic"] = CheckResult(result.name, "failed", result.detail + DETERMINISTIC)

    def _pickle(self, base):
        self.set("picklable", True, note="every run here rebuilt the factory from its pickled bytes in the policy's "
                                         "process")

    def shared_state(self) -> CheckResult:
        """``shared_state`` judged here: the two seeds' 120-step runs alone (each in a process of its
        own, from ``valid_with_phi``) against the same runs one after the other in one confined
        process, the policy built anew for each (the second seed, the first, the second again)."""
        alone = {seed: self.phi_runs.get(seed) for seed in self.seeds}
        if None in alone.values():
            return CheckResult("shared_state", "skipped", "skipped: the 120-step runs of valid_with_phi did not "
                                                          "complete with the loop in the calling process")
        first, second = self.seeds
        self.runs += 1
        try:
            results = _in_one_process("A", self.name, (second, first, second), self.factory_bytes, self.needs,
                                      self.seconds, global_seed=self.runs * GLOBAL_SEEDS + self.seed, **_WITH_PHI)
        except Exception as exc:  # noqa: BLE001
            return CheckResult("shared_state", "failed", f"the runs one after the other in one process failed: "
                                                         f"{_error(exc)}")
        after = {first: _trajectory(results[1]), second: _trajectory(results[2])}
        return _shared_state_verdict(self.seeds, alone, after, "in one confined process")


def _confined_checks(suite) -> str:
    """Run ``suite`` in a confined process, and its replications again with the loop here and the
    policy behind the channel (:mod:`study.policies.verdict`); the verdict of the two put into
    ``suite.results``.  Returns the confinement that applied, or ``"none: ..."`` (then nothing
    ran: the caller runs the suite here)."""
    try:
        packed = fresh.dumps(suite.factory)
    except Exception as exc:  # noqa: BLE001
        return f"none: the factory cannot be pickled for a confined process ({type(exc).__name__}); checked here"
    needs = sorted(hooks.needs_of(suite.factory))
    jobs = [("suite", suite.name, suite.seed, suite.time_limit, suite.label)]
    runs = fresh.FreshRuns(packed, _in_confinement, jobs, _FRESH_SECONDS + 40 * suite.time_limit,
                           confined={"needs": needs, "hidden": []})
    trusted = _TrustedSuite(suite, packed, needs)
    try:  # while the suite's own process runs
        trusted.execute()
    finally:
        ((status, value),) = runs.outcomes()
    rows = value.get("results") if status == "ok" and isinstance(value, dict) else None
    if not (isinstance(rows, list) and all(isinstance(r, list) and len(r) == 3 and r[0] in CHECKS and
                                           r[1] in ("passed", "failed", "skipped") and isinstance(r[2], str)
                                           for r in rows)):
        detail = value if status != "ok" else "its answer was not the results' format"
        reported = {"runs": CheckResult("runs", "failed", f"the confined process of the checks failed: {detail}")}
        reported.update({c: CheckResult(c, "skipped", "skipped: the confined process of the checks failed")
                         for c in CHECKS[1:]})
        value = {}
    else:
        reported = {name: CheckResult(name, status_, detail) for name, status_, detail in rows}
    # shared_state: the seeds run one after the other in the suite's process (self-reported) against
    # each run alone in a fresh process, here
    suite.phi_runs = {"again": _trajectory_of(value.get("again")), suite.seeds[1]: _trajectory_of(value.get("second"))}
    alone = {seed: trusted.phi_runs.get(seed) for seed in suite.seeds}  # each in a fresh process
    suite.fresh = (_Outcomes([("ok", alone[s]) for s in suite.seeds]) if None not in alone.values() else
                   "skipped: the 120-step runs of valid_with_phi did not complete with the loop in the calling process")
    suite.results = {}
    suite._shared_state()
    verdict = combined({**trusted.results, "shared_state": trusted.shared_state()},
                       {**reported, "shared_state": suite.results["shared_state"]}, CHECKS)
    suite.results = {name: verdict.get(name, CheckResult(name, "skipped", "skipped: not reported")) for name in CHECKS}
    return confinement_of(needs)


__all__ = ["CHECKS", "CheckResult", "PolicyCheckError", "PolicyCheckReport", "check_policy"]
