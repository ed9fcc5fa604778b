"""The worker side: one task runs a batch of replications of one cell (or of a group of cells
that share a prefix of their steps) and returns their rows as Arrow tables.

An exception in one replication is caught and returned as a failure record; the others still run.
So is ``sys.exit`` in a policy (``SystemExit``), and a replication that runs longer than its
setting's ``time_limit``: under a time limit a task's replications run one after the other in a
process of their own, forked from a clean server (:mod:`study.policies.fresh`), where a timer signal raises
:class:`ReplicationTimeout` at the limit; a policy that catches it (``except Exception:`` in a
retry loop) has its process ended :func:`grace` later -- a hard stop; the task's next replications
go on in a new process -- and a replication that caught it and finished anyway is not stored
either.  Either way the replication is recorded as failed with ``ReplicationTimeout`` and the others
of the task are computed and stored.  A worker that dies (``os._exit``, a fatal signal, the OOM killer) is not retried by Ray:
the driver runs the replications of that task one by one to find the one that crashed, and
records it as failed (:func:`crash_message`).
A replication is reproduced exactly by ``study.run_replication(setting, method, seed=row.seed,
M=row.M, **overrides)`` with the overrides from the manifest.

User code never shares a process with the loop, the environment, the truth, the estimator or the
storage: in a user policy's cell the loop runs here, and each replication's policy runs in a
process of its own (:mod:`study.policies.sandbox`), forked from a policy server that never runs
user code, confined by the kernel (Landlock and seccomp, :mod:`study.policies.confine`) and
watched by the audit hook before the policy's factory is unpickled or its module imported; it is
asked step by step through a channel that carries back only choices in a fixed format (never a
pickle).  A policy that fails, crashes, refuses the channel's format or outlives the setting's
``time_limit`` fails its replication, named, and nothing it did reaches this process.  Every task
reports which of the study's user-policy modules its worker process has imported (none, by
construction); the driver records it per run in the manifest (``user_code``), and only cells
computed in clean processes are reused as identical (:mod:`study.runner.reuse`).
"""
from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
import time
import traceback

import numpy as np
import pyarrow as pa

from ..policies import ALL_METHODS, fresh, sandbox
from ..results.schema import COST_SCHEMA, INTERVAL_SCHEMA, TRAJECTORY_SCHEMA
from ..simulation.environment import BTLEnvironment
from ..simulation.replication import run_environment_methods, run_replication
from .numerics import numerics

CRASHES_PER_CELL = 3  # replications of one cell that crashed their process, alone, before the rest is not run
# trajectory and interval columns a result may lack (recorded as null): added after replicate hooks were written
OPTIONAL_COLUMNS = ("before_phi",)
OPTIONAL_INTERVAL_COLUMNS = ("cs_lower", "cs_upper", "cs_covered")
_SETTING_CACHE: dict = {}
_REMOTE = None


class WithFactories:
    """A replication function that builds registered policies from the factories shipped with the
    task (the registry of :func:`study.register_policy` lives in the driver's process only).  The
    factories travel pickled, as bytes (:func:`study.policies.fresh.dumps`), and are unpickled only
    in a user policy's confined process (:mod:`study.policies.sandbox`): unpickling one imports
    its module, which must not happen in a trusted process."""

    def __init__(self, factories: dict, base=None):
        self.factories, self.base = {m: fresh.dumps(f) for m, f in factories.items()}, base
        self._loaded: dict = {}

    def __getstate__(self):
        return {"factories": self.factories, "base": self.base}

    def __setstate__(self, state):
        self.factories, self.base, self._loaded = state["factories"], state["base"], {}

    def factory(self, method):
        if method not in self._loaded:
            data, loader = self.factories[method]
            self._loaded[method] = __import__(loader, fromlist=["loads"]).loads(data)
        return self._loaded[method]

    def __call__(self, setting, method, seed):
        extra = {"policy": self.factory(method)} if method in self.factories else {}
        if self.base is not None:
            return self.base(setting, method, seed, **extra)
        return run_replication(setting, method, seed, **extra)


def as_cells(cell) -> tuple:
    """A cell or a tuple of cells, as a tuple."""
    return tuple(cell) if isinstance(cell, tuple) else (cell,)


def trajectory_table(study, cell, setting, rep, seed, result) -> pa.Table:
    """The trajectory rows of one replication (schema :data:`study.results.schema.TRAJECTORY_SCHEMA`)."""
    traj = result.trajectory
    n = len(traj["t"])
    const = {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
             "T0": setting.T0, "T": setting.T, "rep": rep, "seed": seed}
    arrays = []
    for f in TRAJECTORY_SCHEMA:
        if f.name in const:
            arrays.append(pa.array([const[f.name]] * n, type=f.type) if n else pa.array([], type=f.type))
        elif f.name in OPTIONAL_COLUMNS and f.name not in traj:  # a replicate hook's result without it
            arrays.append(pa.nulls(n, type=f.type))
        elif f.type == pa.bool_():
            arrays.append(pa.array(np.asarray(traj[f.name]).astype(bool)))
        else:
            arrays.append(pa.array(np.asarray(traj[f.name]), type=f.type, safe=True))
    return pa.Table.from_arrays(arrays, schema=TRAJECTORY_SCHEMA)


def interval_table(study, cell, rep, seed, result) -> pa.Table:
    """The interval rows of one replication (schema :data:`study.results.schema.INTERVAL_SCHEMA`)."""
    ints = result.intervals
    n = len(ints["t"]) if ints else 0
    const = {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
             "rep": rep, "seed": seed}
    arrays = []
    for f in INTERVAL_SCHEMA:
        if f.name in const:
            arrays.append(pa.array([const[f.name]] * n, type=f.type))
        elif f.name in OPTIONAL_INTERVAL_COLUMNS and len((ints or {}).get(f.name, ())) != n:
            arrays.append(pa.nulls(n, type=f.type))  # a replicate hook's result without them (absent or empty)
        elif f.type == pa.bool_():
            arrays.append(pa.array(np.asarray(ints[f.name]).astype(bool) if n else [], type=f.type))
        else:
            arrays.append(pa.array(np.asarray(ints[f.name]) if n else [], type=f.type))
    return pa.Table.from_arrays(arrays, schema=INTERVAL_SCHEMA)


def cost_table(study, cell, rep, seed, result) -> pa.Table:
    """The cost row of one replication (schema :data:`study.results.schema.COST_SCHEMA`); nulls where
    the result has no cost record (a replicate hook's)."""
    cost = getattr(result, "cost", None) or {}
    row = {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M, "rep": rep, "seed": seed}
    row.update({f.name: cost.get(f.name) for f in COST_SCHEMA if f.name not in row})
    return pa.Table.from_pylist([row], schema=COST_SCHEMA)


def failure_record(study, cell, rep, seed, error, tb, run_id) -> dict:
    """One row of the failures dataset."""
    return {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
            "rep": int(rep), "seed": int(seed), "error": error, "traceback": tb, "run_id": run_id}


def _setting_of(cell):
    """The cell's resolved Setting (cached per process by name and overrides)."""
    if cell.base is not None or cell.named is not None:  # built from data or defined by the user: not cached by name
        return cell.resolve()
    key = cell.overrides + (("__name", cell.setting),)
    if key not in _SETTING_CACHE:
        _SETTING_CACHE[key] = cell.resolve()
    return _SETTING_CACHE[key]


def _results(cells, setting, seed, replicate) -> dict:
    """{method: ReplicationResult} of one replication of every cell of a group."""
    if len(cells) > 1:  # a group sharing a prefix (RB and ERA): computed once, value for value equal
        methods = [c.method for c in cells]
        return run_environment_methods(BTLEnvironment(setting, seed), methods, setting, seed=int(seed))
    method = cells[0].method
    if replicate is None:
        return {method: run_replication(setting, method, seed)}
    return {method: replicate(setting, method, seed)}


class ReplicationTimeout(TimeoutError):
    """A replication ran longer than its setting's ``time_limit``."""


def grace(seconds: float) -> float:
    """How long a replication may go on after its time limit before its process is ended: a tenth
    of the limit, at least 1 s and at most 60 s."""
    return min(60.0, max(1.0, 0.1 * seconds))


def _timeout_message(what: str, seconds: float) -> str:
    return (f"{what} exceeded the time limit of {seconds:g} s (setting time_limit) and was stopped; the policy "
            "may hang (an endless loop, a wait that never ends)")


@contextlib.contextmanager
def time_limit(seconds, what: str):
    """Raise :class:`ReplicationTimeout` in this (main) thread if the block runs longer than
    ``seconds`` (None: no limit; outside the main thread no limit can be enforced here: run the
    block in a process of its own, :func:`run_batch`).  A block that catches the timeout and
    completes anyway raises it at its end: what it computed after the limit is not kept."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = []

    def expire(signum, frame):
        fired.append(True)
        raise ReplicationTimeout(_timeout_message(what, seconds))

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
    if fired:
        raise ReplicationTimeout(_timeout_message(what, seconds) + " (the policy caught the timeout and went on; "
                                 "its result is not stored)")


def crash_message(exc, cell, rep, seed, cause=None) -> str:
    """The failure of a replication whose worker process died: what happened, which replication,
    and how to reproduce it outside Ray.  ``exc``: the exception, or the name of the error."""
    name = exc if isinstance(exc, str) else type(exc).__name__
    if cause is None and "OutOfMemory" in name:
        cause = "Ray's memory monitor killed its worker: the node ran out of memory (a huge allocation?)"
    elif cause is None:
        cause = "its worker process died (os._exit, a fatal signal, or the kernel's OOM killer)"
    overrides = ", ".join(f"{k}={v!r}" for k, v in cell.overrides if k != "M")
    return (f"{name}: policy {cell.method!r} crashed the worker running replication rep={rep} (seed {seed}) of "
            f"setting {cell.setting} (M={cell.M}): {cause}; not retried (a deterministic crash would only "
            f"repeat). Reproduce it with study.run_replication({cell.setting!r}, {cell.method!r}, seed={seed}, "
            f"M={cell.M}{', ' + overrides if overrides else ''})")


def _replicate(study, cells, setting, rep, seed, replicate, record_intervals, limit, label) -> tuple:
    """One replication of every cell of a group, as tables: ("ok", [(trajectory, intervals, costs)])
    or ("failed", error, traceback)."""
    try:
        with time_limit(limit, label):
            results = _results(cells, setting, seed, replicate)
        return ("ok", [(trajectory_table(study, c, setting, rep, seed, results[c.method]),
                        interval_table(study, c, rep, seed, results[c.method]) if record_intervals else None,
                        cost_table(study, c, rep, seed, results[c.method]))
                       for c in cells])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- recorded, the batch goes on
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, sandbox.PolicyProcessError):
            return ("failed", exc.message, exc.trace)  # the traceback in the policy's process, as text
        if isinstance(exc, SystemExit):
            error = f"SystemExit: the policy called sys.exit({exc.code!r}) during {label}"
        return ("failed", error, traceback.format_exc())


def replicate_in_process(replicate, study, cells, rep, seed, record_intervals, limit, label) -> tuple:
    """:func:`_replicate` in a process of its own (run by :mod:`study.policies.fresh`: built-in
    methods under a time limit)."""
    return _replicate(study, cells, _setting_of(cells[0]), rep, seed, replicate, record_intervals, limit, label)


def _takes_policy(hook) -> bool:
    """Does ``hook`` accept a ``policy=`` keyword (the factory of the confined policy)?"""
    import inspect
    try:
        params = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "policy" or p.kind is p.VAR_KEYWORD for p in params)


def _confined(study, cell, setting, reps_seeds, replicate, record_intervals, labels, user, max_crashes) -> list:
    """The replications of a user policy's cell, the loop here (trusted: environment, truth,
    estimator, storage) and the policy in a confined process of its own per replication
    (:mod:`study.policies.sandbox`), asked step by step; after ``max_crashes`` replications whose
    policy process ended without an answer, the rest are not run."""
    method, limit = cell.method, getattr(setting, "time_limit", None)
    factories = replicate.factories if isinstance(replicate, WithFactories) else {}
    base = replicate.base if isinstance(replicate, WithFactories) else replicate
    outcomes, crashes = [], 0
    for (rep, seed), label in zip(reps_seeds, labels):
        if max_crashes is not None and crashes >= max_crashes:
            outcomes.append(("failed", f"NotRun: policy {method!r} crashed its process in {max_crashes} replications "
                                       f"of setting {cell.setting} (M={cell.M}) already (see their failures), so the "
                                       "rest of the task was not run; fix the policy and rerun the same command to "
                                       "compute them", ""))
            continue
        factory = sandbox.ConfinedFactory(method, factories.get(method), user.get("needs", ()), user.get("hidden", ()),
                                          user.get("trust", False), limit)

        def run(s, m, sd, factory=factory):
            if base is not None and not _takes_policy(base):  # a hook that builds no policy (a stand-in)
                return base(s, m, sd)
            return (base or run_replication)(s, m, sd, policy=factory)

        try:
            outcome = _replicate(study, (cell,), setting, rep, seed, run, record_intervals, None, label)
            if outcome[0] == "ok" and (late := factory.late_refusal()) is not None:
                outcome = ("failed", late, "")
        finally:
            factory.close()
        if outcome[0] == "failed" and outcome[1].startswith("PolicyCrashed"):
            crashes += 1
            outcome = ("failed", crash_message("WorkerCrashedError", cell, rep, seed,
                                               cause="its policy's confined process ended without an answer (os._exit, "
                                                     "a fatal signal, or the kernel's OOM killer)"), "")
        elif outcome[0] == "failed" and outcome[1].startswith("PolicyTimeout"):
            outcome = ("failed", f"ReplicationTimeout: {_timeout_message(label, limit)}; its process was ended", "")
        outcomes.append(outcome)
    return outcomes


def _isolated(study, cells, reps_seeds, replicate, record_intervals, limit, labels, max_crashes=None) -> list:
    """:func:`_replicate` of each (rep, seed), one after the other in a process of their own, which
    is ended :func:`grace` seconds after a replication's ``limit`` (None: no limit; the next ones go
    on in a new one, and after ``max_crashes`` replications that ended their process the rest are
    not run).  Built-in methods only: a user policy's cells run through :func:`_confined`."""
    jobs = [(study, cells, rep, seed, record_intervals, limit, label)
            for (rep, seed), label in zip(reps_seeds, labels)]
    runs = fresh.FreshRuns(fresh.dumps(replicate), replicate_in_process, jobs,
                           None if limit is None else limit + grace(limit), in_order=True, max_crashes=max_crashes)
    outcomes = []
    for (rep, seed), label, (status, value) in zip(reps_seeds, labels, runs.outcomes()):
        if status == "ok":
            outcomes.append(value)
        elif status == "timeout":
            outcomes.append(("failed", f"ReplicationTimeout: {_timeout_message(label, limit)}, and went on although the "
                                       f"policy was told to stop (it caught the timeout?): its process was ended "
                                       f"{grace(limit):g} s later", ""))
        elif status == "error":  # the process's own machinery failed (the factory would not unpickle, ...)
            outcomes.append(("failed", f"{value} (in the process of its own that runs {label})", ""))
        elif status == "not_run":
            outcomes.append(("failed", f"NotRun: policy {'/'.join(c.method for c in cells)!r} crashed its process in "
                                       f"{max_crashes} replications of setting {cells[0].setting} (M={cells[0].M}) "
                                       "already (see their failures), so the rest of the task was not run; fix the "
                                       "policy and rerun the same command to compute them", ""))
        else:
            outcomes.append(("failed", crash_message("WorkerCrashedError", cells[0], rep, seed, cause=value), ""))
    return outcomes


def user_modules_here(modules) -> list:
    """Which of ``modules`` (top-level names of the study's user policies) this process has imported."""
    return sorted(m for m in modules or () if m in sys.modules)


def run_batch(study: str, cell, reps_seeds, replicate=None, record_intervals=True, run_id: str = "",
              user=None) -> dict:
    """Run replications ``reps_seeds = [(rep, seed), ...]`` of one cell, in this process, or in a
    process of their own when the cell is a user policy's or the setting has a ``time_limit`` (the
    module docstring).  ``user``: ``{"needs": {method: [needs]}, "modules": [top-level module
    names of the study's user policies], "hidden": [paths a policy may not read: the study's
    output directory], "trust": bool (``--trust-policy-code``: run user policies where the kernel
    cannot confine them)}``.

    ``cell`` may also be a tuple of cells that differ only by method and share a prefix of their
    steps (:func:`study.runner.batching.cell_groups`), all run on each replication's one
    environment.  Returns ``{"trajectory": Table, "intervals": Table, "costs": Table, "failures": [dict],
    "seconds", "cpu_seconds", "node", "numerics", "user_modules"}`` (``numerics``: the BLAS kernels and
    numpy SIMD this process computed with, :func:`study.runner.numerics.numerics`;
    ``user_modules``: which user-policy modules this worker process has imported)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    cells = as_cells(cell)
    setting = _setting_of(cells[0])
    trajs, ints, costs, failures = [], [], [], []
    limit = getattr(setting, "time_limit", None)
    methods = "/".join(c.method for c in cells)
    labels = [f"replication rep={rep} (seed {seed}) of {methods} in setting {cells[0].setting}" for rep, seed in reps_seeds]
    own = [c.method for c in cells if c.method not in ALL_METHODS]
    if own:  # a user policy's cell (never grouped with another): the policy in a confined process
        user = dict(user or {})
        user["needs"] = tuple((user.get("needs") or {}).get(own[0], ()))
        outcomes = _confined(study, cells[0], setting, reps_seeds, replicate, record_intervals, labels, user,
                             CRASHES_PER_CELL)
    elif limit is None:
        outcomes = (_replicate(study, cells, setting, rep, seed, replicate, record_intervals, None, label)
                    for (rep, seed), label in zip(reps_seeds, labels))
    else:
        outcomes = _isolated(study, cells, reps_seeds, replicate, record_intervals, limit * len(cells), labels,
                             CRASHES_PER_CELL)
    for (rep, seed), outcome in zip(reps_seeds, outcomes):
        if outcome[0] != "ok":
            _, error, tb = outcome
            failures.extend(failure_record(study, c, rep, seed, error, tb, run_id) for c in cells)
            continue
        for traj, interval, cost in outcome[1]:
            trajs.append(traj)
            costs.append(cost)
            if interval is not None and interval.num_rows:
                ints.append(interval)
    return {
        "trajectory": pa.concat_tables(trajs) if trajs else TRAJECTORY_SCHEMA.empty_table(),
        "intervals": pa.concat_tables(ints) if ints else INTERVAL_SCHEMA.empty_table(),
        "costs": pa.concat_tables(costs) if costs else COST_SCHEMA.empty_table(),
        "failures": failures,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
        "node": _node_id(),
        "numerics": numerics(),
        "user_modules": user_modules_here((user or {}).get("modules")),
    }


def worker_died(exc) -> bool:
    """Did a task fail because its worker process (or node) died, rather than by an exception
    raised in it?"""
    name = type(exc).__name__
    return any(k in name for k in ("WorkerCrashed", "OutOfMemory", "NodeDied", "ActorDied", "LocalRayletDied"))


def lost_batch(study, cell, reps_seeds, exc, run_id) -> dict:
    """The result of a task that did not return (its worker died, ...): every replication of it
    recorded as failed, with :func:`crash_message` when the worker died."""
    tb = "".join(traceback.format_exception(exc))

    def error(c, r, s):
        if worker_died(exc):
            return crash_message(exc, c, r, s)
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"

    return {"trajectory": TRAJECTORY_SCHEMA.empty_table(), "intervals": INTERVAL_SCHEMA.empty_table(),
            "failures": [failure_record(study, c, r, s, error(c, r, s), tb, run_id)
                         for c in as_cells(cell) for r, s in reps_seeds]}


def not_run_batch(study, cell, reps_seeds, crashes, run_id) -> dict:
    """Replications recorded as failed without running: their policy crashed its worker in
    ``crashes`` replications of the same cell already (each run alone, each named in its own
    failure record)."""
    cells = as_cells(cell)
    error = (f"NotRun: policy {'/'.join(c.method for c in cells)!r} crashed its worker in {crashes} replications "
             f"of setting {cells[0].setting} (M={cells[0].M}) already (see their failures), so the rest of the cell "
             "was not run; fix the policy and rerun the same command to compute them")
    return {"trajectory": TRAJECTORY_SCHEMA.empty_table(), "intervals": INTERVAL_SCHEMA.empty_table(),
            "failures": [failure_record(study, c, r, s, error, "", run_id) for c in cells for r, s in reps_seeds]}


def _node_id() -> str:
    """The Ray node this task runs on (the host name outside Ray), for the manifest."""
    try:
        import ray
        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        pass
    return socket.gethostname()


def remote_run_batch():
    """:func:`run_batch` as a Ray remote function (one CPU; not retried by Ray when its worker
    dies: the driver isolates the replication that crashed instead, see the module docstring)."""
    global _REMOTE
    if _REMOTE is None:
        import ray
        _REMOTE = ray.remote(num_cpus=1, max_retries=0)(run_batch)
    return _REMOTE
