"""The driver: run (or resume) a plan on Ray, writing checksummed Parquet under ``out``.

Resume: a rerun computes only the keys missing from the trajectory dataset (failed replications
are therefore retried).  If the stored manifest's fingerprint differs from the requested one the
driver refuses (:class:`study.runner.fingerprint.ConfigMismatch`) unless ``fresh``, which deletes
this study's three datasets first.  Identical cells stored by another study are copied
(:mod:`study.runner.reuse`).  Storage is :mod:`study.results.storage`, the Ray connection
:mod:`study.runner.rayconn`, the tasks :mod:`study.runner.worker`.
"""
from __future__ import annotations

import collections
import dataclasses
import datetime as _dt
import os
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..policies import ALL_METHODS, confine, registered_policies, resolve_policy
from ..policies.hooks import needs_of
from ..policies.described import declared_needs
from ..results import storage
from ..results.storage import dataset_dirs
from . import manifest as manifests
from .batching import BatchSize, batches, choose_batch_size
from .fingerprint import check_stored
from .numerics import describe, numerics
from .progress import Interrupts, Progress
from .rayconn import connect
from .reuse import copy_reused, count_reusable, reusable
from .worker import CRASHES_PER_CELL, WithFactories, as_cells, lost_batch, not_run_batch, remote_run_batch, worker_died
from .writer import Writer

FLUSH_SECONDS = 1.0  # finished replications are committed to disk at most this long after arrival
WAIT_SECONDS = 0.5   # the driver loop wakes at least this often (signals, flushes)
NODE_LOSSES_PER_BATCH = 3  # a batch whose node is lost is run again, up to this many times


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_study` runs a plan.  Only ``replicate`` can change a number of the results.

    Attributes
    ----------
    address : str, optional
        Ray cluster to join: ``"auto"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``; default
        ``RAY_ADDRESS`` if set, else an embedded local Ray (:func:`study.runner.rayconn.connect`).
    num_cpus : int, optional
        CPUs of an embedded local Ray (default: all).
    fresh : bool
        Delete this study's stored results first.
    replicate : callable, optional
        ``replicate(setting, method, seed) -> ReplicationResult``; default the plan's hook (replay
        studies) or :func:`study.run_replication`.  It must be importable on the workers; it is
        pickled once and shipped through the object store, with any data it carries.
    record_intervals : bool, optional
        Store the CI rows; default: when some cell has ``ci_every > 0``.
    batch_size : int, optional
        Replications per task (default adaptive, :class:`study.runner.batching.BatchSize`).
    max_in_flight : int, optional
        Tasks submitted and not yet gathered (default 2 per CPU + 2).
    progress : bool
        A progress bar on a terminal, progress lines otherwise.
    flush_rows, flush_seconds : int, float
        Finished work is committed once this many rows or seconds have accumulated.
    stop_after_batches : int, optional
        Stop after this many tasks are gathered (simulates an interruption; used by the tests).
    reuse : bool
        Copy identical cells stored by another study of the same seed namespace.
    handle_signals : bool
        SIGINT/SIGTERM stop the run cleanly (from the main thread only).
    init_timeout : float, optional
        Seconds to join a cluster before giving up with ``ConnectionError``.
    runtime_env : dict, optional
        Ray runtime environment of the run, e.g. ``{"py_modules": ["/abs/mypkg"]}`` so that a user
        policy's package reaches the workers of a cluster.
    log : callable, optional
        ``log(message)``; default: print to stderr.
    trust_policy_code : bool
        Run user policies where the kernel cannot confine their processes (no Landlock or
        seccomp: another OS, an old kernel), with the audit hooks only; recorded in the manifest
        (``user_code.confinement``).  Without it such a run is refused before any work.
    """

    address: str | None = None
    num_cpus: int | None = None
    fresh: bool = False
    replicate: Callable | None = None
    record_intervals: bool | None = None
    batch_size: int | None = None
    max_in_flight: int | None = None
    progress: bool = True
    flush_rows: int = 500_000
    flush_seconds: float = FLUSH_SECONDS
    stop_after_batches: int | None = None
    reuse: bool = True
    handle_signals: bool = True
    init_timeout: float | None = None
    log: Callable | None = None
    runtime_env: dict | None = None
    trust_policy_code: bool = False


@dataclass
class StudyReport:
    """What one :func:`run_study` call did."""

    study: str
    out: str
    total: int
    stored_before: int
    computed: int
    failed: int
    seconds: float
    interrupted: bool
    failures: list
    reused: int = 0
    signal: str | None = None  # "SIGINT"/"SIGTERM" when a signal stopped the run

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.interrupted

    @property
    def exit_status(self) -> int:
        """0 all stored, 1 some replication failed, 128 + signal number when a signal stopped it."""
        if self.signal:
            return 128 + int(getattr(signal, self.signal))
        return 0 if self.ok else 1

    def summary(self) -> str:
        """A few lines for the terminal: what was computed, failed, reused and stored."""
        where = Path(self.out) / self.study
        if self.interrupted:
            now = self.stored_before + self.reused + self.computed
            text = (f"[{self.study}] interrupted{' by ' + self.signal if self.signal else ''}: "
                    f"{self.computed} replications computed and stored by this run, {self.failed} failed; "
                    f"{now} of {self.total} are now stored in {where}. Rerun the same command to resume.")
        else:
            state = "FAILED" if self.failed else "done"
            reused = f"{self.reused} reused from identical cells, " if self.reused else ""
            text = (f"[{self.study}] {state}: {self.computed} replications computed, {self.failed} failed, "
                    f"{reused}{self.stored_before} already stored, {self.total} in the study; "
                    f"{self.seconds:.1f} s -> {where}")
        for f in self.failures[:10]:
            text += (f"\n  failed {f['setting']}/{f['method']}/M={f['M']} rep={f['rep']} "
                     f"seed={f['seed']}: {f['error']}")
        if len(self.failures) > 10:
            text += f"\n  ... and {len(self.failures) - 10} more"
        if self.failures:
            text += "\n" + failures_hint(self.out, self.study)
        return text


def failures_hint(out, study) -> str:
    """Where the tracebacks of a study's failed replications are stored, and how to print them."""
    return (f"  tracebacks are stored in {Path(out) / (study + '_failures')}/; print them with "
            f"`python -m study.results failures {out} {study}` (or rerun with --verbose); the next run "
            "retries these replications")


def run_study(plan, out, options: RunOptions | None = None, **fields) -> StudyReport:
    """Run (or resume) ``plan``, writing Parquet under ``out``.

    Parameters
    ----------
    plan : study.runner.plan.Plan
        From :func:`study.runner.make_plan`.
    out : path
        The results directory (created if missing).
    options : RunOptions, optional
        How to run; ``fields`` (keywords of :class:`RunOptions`) replace single options.

    Returns
    -------
    StudyReport

    Raises
    ------
    study.runner.fingerprint.ConfigMismatch
        ``out`` holds results of another configuration (and not ``fresh``).
    study.results.storage.StorageError
        Another process holds the directory's lock (``StudyLocked``), or a stored part is damaged
        (``DamagedPart``, ``DuplicateKeys``).
    ConnectionError
        The Ray cluster cannot be reached.
    """
    options = dataclasses.replace(options or RunOptions(), **fields)
    return _StudyRun(plan, Path(out).expanduser().resolve(), options).execute()


class _StudyRun:
    """One call of :func:`run_study`: its options resolved, and the state it builds up."""

    def __init__(self, plan, out: Path, options: RunOptions):
        self.plan, self.out = plan, out
        self.log = options.log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        record = options.record_intervals
        if record is None:
            record = any(c.resolve().ci_every > 0 for c in plan.cells)
        replicate = options.replicate if options.replicate is not None else plan.replicate
        users = [m for m in dict.fromkeys(c.method for c in plan.cells) if m not in ALL_METHODS]
        kernel = confine.status()
        if users and not kernel["available"] and not options.trust_policy_code:  # before any user code runs
            raise ValueError(f"user policies {sorted(users)} cannot be confined by the kernel here "
                             f"({kernel['reason']}); rerun with --trust-policy-code (trust_policy_code=True) to "
                             "run them with the audit hooks only (recorded in the manifest)")
        self.user = user_policies(plan)
        self.user_record = {"policies": {m: {"needs": n} for m, n in self.user["needs"].items()},
                            "replicate_hook": _hook_name(options.replicate), "tainted_cells": []}
        if self.user["needs"]:
            self.user["hidden"] = [str(Path(out).resolve())]
            self.user["trust"] = bool(options.trust_policy_code)
            self.user_record["confinement"] = {
                "kernel": kernel["available"], "landlock_abi": kernel["landlock_abi"], "seccomp": kernel["seccomp"],
                "refusals_reported": bool(kernel["available"] and kernel["refusals_reported"]),
                "trust_policy_code": bool(options.trust_policy_code)}
        if plan.factories:  # registered policies exist only in this process: ship them with the tasks
            replicate = WithFactories(dict(plan.factories), replicate)
        if replicate is None and any(c.base is not None for c in plan.cells):
            raise ValueError(f"study {plan.study!r} needs a replicate hook (build the plan with make_plan)")
        self.options = dataclasses.replace(options, record_intervals=bool(record), replicate=replicate)
        self.run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.failures, self.computed = [], 0
        self.numerics_seen, self.numerics_by_node, self.stored_numerics = {}, {}, {}

    def execute(self) -> StudyReport:
        """Hold the lock, check what is stored, connect to Ray if there is work, run, record."""
        with storage.study_lock(self.out, run_id=self.run_id):
            existing = self._prepare()
            conn = None
            if self.n_todo:  # before any write: an unreachable cluster leaves the directory as it was
                o = self.options
                conn = connect(o.address, o.num_cpus, log=self.log, init_timeout=o.init_timeout,
                               runtime_env=o.runtime_env)
            return self._run(existing, conn)

    def _prepare(self):
        """Delete (``fresh``), check the configuration, verify what is stored; count the work."""
        plan, out = self.plan, self.out
        storage.check_no_links(out, plan.study)  # before anything is read or removed: links are never followed
        if self.options.fresh:
            for d in dataset_dirs(out, plan.study).values():
                if d.is_dir():
                    shutil.rmtree(d)  # not a link (checked above); links inside are removed, never followed
        existing = check_stored(plan, out)
        storage.cleanup(out, plan.study)
        self.done = set(storage.committed(out, plan.study)["keys"])  # verified: damaged parts raise here
        self.stored_before = plan.count_stored(self.done)
        if len(self.done) > self.stored_before:
            self.log(f"[{plan.study}] note: {len(self.done) - self.stored_before} stored replications lie "
                     f"outside this run's reps={plan.reps}; they stay in the dataset")
        missing = plan.n_replications - self.stored_before
        self.sources = {}
        if self.options.reuse and missing:
            self.sources = reusable(plan, out, {c.key for c in plan.cells}, self.options.record_intervals)
        self.n_reusable = count_reusable(plan, self.sources, self.done)
        self.n_todo = missing - self.n_reusable
        return existing

    def _run(self, existing, conn) -> StudyReport:
        """Write the manifest, reuse and compute under the signal handlers, record the outcome."""
        plan = self.plan
        for d in dataset_dirs(self.out, plan.study).values():
            storage.make_dir(d)
        manifest, run = manifests.open_run(plan, existing, plan.fingerprint(), self.run_id,
                                           self.options.record_intervals, self.stored_before)
        run["user_code"] = self.user_record
        self.stored_numerics = manifests.stored_numerics(existing)
        storage.write_manifest(manifest, self.out, plan.study)
        start, finished, stopped = time.perf_counter(), False, False
        interrupts = Interrupts(plan.study, self.log, enabled=self.options.handle_signals)
        with interrupts:
            try:
                reused = self._reuse() if self.sources else {}
                run["reused"] = {"replications": sum(reused.values()), "from": reused}
                if self.n_todo and not interrupts.requested:
                    stopped = self._compute(conn, run, interrupts)
                finished = True
            except BaseException as exc:  # recorded in the manifest ("error"), then raised as it was
                run["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
                raise
            finally:
                if conn is not None and conn.started_here:
                    import ray
                    ray.shutdown()
                n_reused = run.get("reused", {}).get("replications", 0)
                seconds = time.perf_counter() - start
                manifests.record_numerics(manifest, run, self.out, plan.study, self.numerics_seen, self.numerics_by_node)
                manifests.close_run(manifest, run, seconds=seconds, computed=self.computed,
                                    failed=len(self.failures), finished=finished,
                                    interrupted=stopped or interrupts.requested, signals=interrupts.signals,
                                    left=self.n_todo + self.n_reusable - n_reused - self.computed)
                try:
                    storage.write_manifest(manifest, self.out, plan.study)
                except storage.StorageError as exc:
                    if finished:
                        raise
                    # the run's own error is the one to report; the next run marks this one "died"
                    self.log(f"[{plan.study}] note: the manifest could not be updated either ({exc})")
        return StudyReport(plan.study, str(self.out), plan.n_replications, self.stored_before, self.computed,
                           len(self.failures), seconds, stopped or interrupts.requested, self.failures,
                           reused=n_reused, signal=interrupts.signals[0] if interrupts.signals else None)

    def _reuse(self) -> dict:
        """Copy the identical cells stored by other studies; {source study: replications}."""
        return copy_reused(self.plan, self.out, self.done, self.sources, self.run_id,
                           self.options.record_intervals, self.log)

    def _compute(self, conn, run: dict, interrupts) -> bool:
        """Fan the missing replications out as Ray tasks; returns whether the run stopped early."""
        o, plan = self.options, self.plan
        n_cpus = max(1, int(conn.resources.get("CPU", o.num_cpus or os.cpu_count() or 1)))
        size = BatchSize(o.batch_size, choose_batch_size(self.n_todo, n_cpus))
        limit = o.max_in_flight or 2 * n_cpus + 2
        run.update({"ray_mode": conn.mode, "ray_resources": conn.resources,
                    "batch_size": o.batch_size or f"adaptive <= {size.base}", "max_in_flight": limit})
        reused = f", {self.n_reusable} reused" if self.n_reusable else ""
        self.log(f"[{plan.study}] {self.n_todo} replications to compute ({self.stored_before} stored{reused}) "
                 f"in tasks of <= {size.base} on {n_cpus} CPUs ({conn.mode} Ray)")
        work = batches(plan, self.done, size, shared=o.replicate is None)
        loop = _TaskLoop(self, size, limit, interrupts)
        stopped = loop.run(work)
        run["nodes_used"] = sorted(loop.nodes)
        run["task_cpu_seconds"] = round(loop.task_cpu, 3)
        return stopped


def _cell_key(cell) -> tuple:
    return tuple(c.label for c in as_cells(cell))


def _batch_key(cell, reps_seeds) -> tuple:
    return _cell_key(cell) + tuple(rep for rep, _ in reps_seeds)


def node_lost(exc) -> bool:
    """Did a task fail because its node went (a raylet killed, a machine lost), not its policy?"""
    return any(k in type(exc).__name__ for k in ("NodeDied", "LocalRayletDied"))


def user_policies(plan) -> dict:
    """``{"needs": {method: [declared needs]}, "modules": [top-level module names]}`` of the plan's
    user policies (what the workers watch and check for: :mod:`study.runner.worker`)."""
    needs, modules = {}, set()
    for method in dict.fromkeys(c.method for c in plan.cells):
        if method in ALL_METHODS:
            continue
        if method not in registered_policies() and ":" in method:  # never imported here (a confined process reads it)
            needs[method], module = sorted(declared_needs(method)), method.partition(":")[0]
        else:
            factory = resolve_policy(method)
            needs[method] = sorted(needs_of(factory))
            module = getattr(getattr(factory, "func", factory), "__module__", None)
        if module and module not in ("__main__", "builtins"):
            modules.add(module.partition(".")[0])
    return {"needs": needs, "modules": sorted(modules - {"study"})}


def _hook_name(replicate):
    """How a run's replicate function is recorded: None for the default (or a replay's built-in hook)."""
    if replicate is None:
        return None
    target = getattr(replicate, "func", replicate)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"


class _TaskLoop:
    """Submit tasks lazily with a bounded number in flight, gather them as they finish, commit
    finished work within ``flush_seconds``; on a signal or ``stop_after_batches``, cancel what is
    in flight and write what arrived."""

    def __init__(self, study_run: _StudyRun, size: BatchSize, limit: int, interrupts):
        import ray

        self.ray, self.run_, self.size, self.limit, self.interrupts = ray, study_run, size, limit, interrupts
        o = study_run.options
        self.remote = remote_run_batch()
        self.replicate_ref = ray.put(o.replicate) if o.replicate is not None else None
        self.writer = Writer(study_run.out, study_run.plan.study, study_run.run_id)
        self.bar = Progress(study_run.plan.study, study_run.n_todo, o.progress, study_run.log)
        self.in_flight, self.received, self.nodes, self.task_cpu = {}, 0, set(), 0.0
        self.isolate = collections.deque()  # single replications of a task whose worker died
        self.crashes = collections.Counter()  # cell -> replications that crashed their worker, alone
        self.alone = {}  # ref of an isolated replication in flight -> its cell
        self.requeue = collections.deque()  # batches whose node was lost: run again as they were
        self.node_losses = collections.Counter()  # batch -> times its node was lost

    def run(self, work) -> bool:
        """Drive ``work`` (the lazy batches) to the end; returns whether it stopped early."""
        o, stop = self.run_.options, False
        last_news = time.monotonic()
        try:
            while not stop:
                self._submit(work)
                if self.interrupts.requested or not self.in_flight:
                    break
                ready, _ = self.ray.wait(list(self.in_flight), num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    self._gather(ref)
                    last_news = time.monotonic()
                if self.writer.due(o.flush_rows, o.flush_seconds):
                    self.writer.flush()
                if not ready and time.monotonic() - last_news >= 10:
                    self.bar.update(0, 0)  # heartbeat line when nothing finishes for a while
                    last_news = time.monotonic()
                stop = o.stop_after_batches is not None and self.received >= o.stop_after_batches
        finally:
            self._cancel_in_flight()
            try:
                self.writer.flush()
            finally:
                self.bar.close()
                self.run_.computed = self.writer.stored
        self.nodes.discard(None)
        return stop or self.interrupts.requested

    def _submit(self, work) -> bool:
        """Submit tasks until ``limit`` are in flight; returns whether ``work`` is exhausted."""
        r = self.run_
        while len(self.in_flight) < self.limit and not self.interrupts.requested:
            item, alone = self._next_item(work)
            if item is None:
                return True
            cell, reps_seeds = item
            crashes = self.crashes[_cell_key(cell)]
            if crashes >= CRASHES_PER_CELL:  # a policy that crashes every time: do not restart workers for ever
                self._record(cell, reps_seeds, not_run_batch(r.plan.study, cell, reps_seeds, crashes, r.run_id))
                continue
            ref = self.remote.remote(r.plan.study, cell, reps_seeds, self.replicate_ref,
                                     r.options.record_intervals, r.run_id, r.user)
            self.in_flight[ref] = (cell, reps_seeds)
            if alone:
                self.alone[ref] = _cell_key(cell)
        return False

    def _next_item(self, work):
        """(the next (cell, reps_seeds) to run, whether it is a replication run alone): an isolated
        replication first, one per cell at a time (so that a cell that keeps crashing stops after
        ``CRASHES_PER_CELL``), else the next batch of ``work``."""
        if self.requeue:
            return self.requeue.popleft(), False
        busy = set(self.alone.values())
        for k, item in enumerate(self.isolate):
            if _cell_key(item[0]) not in busy:
                del self.isolate[k]
                return item, True
        return next(work, None), False

    def _gather(self, ref) -> None:
        """Take one finished task's result (or record its replications as failed) to the writer."""
        r = self.run_
        cell, reps_seeds = self.in_flight.pop(ref)
        self.alone.pop(ref, None)
        try:
            result = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 -- the worker died, etc.
            lost = self.node_losses[_batch_key(cell, reps_seeds)]
            if node_lost(exc) and lost < NODE_LOSSES_PER_BATCH:  # the node went, not the policy: run it again
                self.node_losses[_batch_key(cell, reps_seeds)] += 1
                self.requeue.append((cell, reps_seeds))
                r.log(f"[{r.plan.study}] a node was lost running {len(reps_seeds)} replications of "
                      f"{'/'.join(c.label for c in as_cells(cell))} ({type(exc).__name__}); running them again")
                return
            if worker_died(exc) and len(reps_seeds) > 1:  # find the replication that crashed: each alone, once
                self.isolate.extend((cell, [rs]) for rs in reps_seeds)
                r.log(f"[{r.plan.study}] a worker died running {len(reps_seeds)} replications of "
                      f"{'/'.join(c.label for c in as_cells(cell))} ({type(exc).__name__}); running them one by one")
                return
            if worker_died(exc):
                self.crashes[_cell_key(cell)] += 1
            result = lost_batch(r.plan.study, cell, reps_seeds, exc, r.run_id)
        self._record(cell, reps_seeds, result)

    def _record(self, cell, reps_seeds, result) -> None:
        """Hand one task's result (or its failure records) to the writer, the report and the bar."""
        r = self.run_
        n = len(reps_seeds) * len(as_cells(cell))
        self.writer.add(result, n - len(result["failures"]))
        self._note_numerics(result)
        self._note_user_code(cell, result)
        # a user policy's replication that ended its own process (run alone in it) counts as a crash of its cell
        self.crashes[_cell_key(cell)] += sum(f["error"].startswith("WorkerCrashedError") and "its process ended"
                                             in f["error"] for f in result["failures"])
        self.nodes.add(result.get("node"))
        self.task_cpu += result.get("cpu_seconds", 0.0)
        if "seconds" in result:
            self.size.observe(result["seconds"], n)
        r.failures.extend(result["failures"])
        self.bar.update(n, len(result["failures"]))
        self.received += 1

    def _note_numerics(self, result) -> None:
        """Record what a task computed with; warn once per new kernel/SIMD combination that makes
        the study's table mix them (with what is stored, or with other workers)."""
        info, r = result.get("numerics"), self.run_
        if not info:
            return
        r.numerics_by_node.setdefault(result.get("node"), info["key"])
        if info["key"] in r.numerics_seen:
            return
        others = dict(r.numerics_seen)
        stored = {k: v for k, v in r.stored_numerics.items()
                  if k not in (info["key"], manifests.UNRECORDED) and k not in others}
        r.numerics_seen[info["key"]] = info
        if stored or others:
            r.log(manifests.mixing_warning(r.plan.study, info, {**stored, **others}, stored=bool(stored)))
        if numerics()["pinned"] and not info.get("pinned"):
            r.log(f"[{r.plan.study}] warning: the driver runs the pinned numerics but a worker (node "
                  f"{result.get('node')}) computes with {describe(info)}: its replications are not bit-identical "
                  "to pinned ones (is its Ray runtime environment's env_vars overridden?)")

    def _note_user_code(self, cell, result) -> None:
        """A built-in cell computed in a worker process that has imported a user policy's module (which
        isolation should make impossible) is recorded as tainted: never reused as identical."""
        modules, r = result.get("user_modules"), self.run_
        tainted = r.user_record["tainted_cells"]
        for c in as_cells(cell):
            if modules and c.method in ALL_METHODS and [c.setting, c.method, c.M] not in tainted:
                tainted.append([c.setting, c.method, c.M])
                r.log(f"[{r.plan.study}] warning: {c.label} was computed in a worker process that had imported user "
                      f"code ({', '.join(modules)}); its replications are stored but never reused as identical cells")

    def _cancel_in_flight(self) -> None:
        """Cancel every task still running (their replications stay missing, computed next run)."""
        for ref in self.in_flight:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 -- already finished or gone
                pass
