"""The votes-to-decision study on Ray (``jobs/votes.py``): how many votes each pair-choice method
needs before the anytime-valid stopping rule decides the top k, and the error it pays.

Roles (after benchopt's runner split):

* :func:`make_votes_plan` -- the validated plan (arenas x methods x replications, budgets, seeds),
  every argument checked before Ray starts;
* :func:`run_votes` -- fans (arena, method, chunk of replications) out as Ray tasks, commits each
  finished chunk as two checksummed Parquet parts and the manifest, resumes, and records failures
  (a failed chunk is stored nowhere and recomputed by the next run);
* :func:`main` -- the command line; the table and figures are :mod:`study.results.votes`'.

Storage (``OUT/votes/``): ``decisions/part-*.parquet`` (one row per replication and k),
``fixed_budget/part-*.parquet`` (one row per replication, checkpoint and k), ``_manifest.json``
(the fingerprint, every committed part with its SHA-256, the runs and their failures).  A part is
committed when the manifest names it; a part whose bytes no longer match its SHA-256 is
recomputed.  Replication r of an arena has the seed ``SeedSequence(seed, spawn_key=(crc32(arena),
r))`` for every method: common random numbers, so differences between methods are paired.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import sys
import time
import traceback
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import _version
from .._util import sha256_files
from ..results import votes as stored
from ..results.files import atomic_write_table, make_dir
from ..results.lock import study_lock
from .catalogue import DEFAULT_SEED
from .fingerprint import ConfigMismatch, core_source_hash
from .manifest import git_commit
from .progress import Interrupts, Progress
from .rayconn import connect

STUDY = "votes"
ENGINE = "study.votes"
CHUNK_REPS = 5  # replications per task: a few seconds to minutes of work, few parts
_VOTES_ROOT = Path(__file__).resolve().parent.parent / "votes"


@dataclass(frozen=True)
class Unit:
    """One task: replications ``reps`` of ``method`` on ``arena``; stored as part ``name``."""

    arena: str
    method: str
    chunk: int
    reps: tuple

    @property
    def name(self) -> str:
        return f"part-{self.arena}-{self.method}-{self.chunk:04d}"


@dataclass(frozen=True)
class VotesPlan:
    """A validated votes study.

    Attributes
    ----------
    arenas, methods : tuple of str
        The arenas and pair-choice methods (``uniform`` always included: every ratio's reference).
    reps, budgets : dict
        Replications and the vote cap of one run, per arena.
    tops : tuple of int
        The k of the top-k decisions.
    level : float
        The stopping rule's level (the guarantee: a wrong top-k set with probability <= 1 - level).
    seed : int
        The root seed.
    quick : bool
        Whether the arenas' quick defaults were used.
    engine : str
        The module that computes a run (``study.votes``; tests substitute a stand-in).
    """

    arenas: tuple
    methods: tuple
    reps: dict
    budgets: dict
    tops: tuple
    level: float
    seed: int
    quick: bool
    engine: str = ENGINE

    def units(self, chunk_reps: int = CHUNK_REPS) -> list:
        """Every task, the largest budgets first (so that the long tasks do not finish last)."""
        out = []
        for arena in sorted(self.arenas, key=lambda a: (-self.budgets[a], self.arenas.index(a))):
            for method in self.methods:
                reps = range(self.reps[arena])
                for chunk, start in enumerate(range(0, len(reps), chunk_reps)):
                    out.append(Unit(arena, method, chunk, tuple(reps[start:start + chunk_reps])))
        return out

    def fingerprint(self) -> dict:
        """What fixes the numbers (not the replication counts: more replications only add parts)."""
        return {"study": STUDY, "engine": self.engine, "budgets": dict(self.budgets), "tops": list(self.tops),
                "level": self.level, "seed": self.seed, "package_version": _version.__version__,
                "core_source": core_source_hash(), "votes_source": votes_source_hash(self.engine)}


# study/votes files that do not compute a run: the sizes (the budgets are in the fingerprint, the
# replication counts only add parts) and the online ranker's policy
_NOT_NUMBERS = ("budgets.py", "online.py")


def votes_source_hash(engine: str = ENGINE) -> str:
    """SHA-256 of what computes a run beyond the core: ``study/votes/`` (but its sizes and its online
    policy) and the LLM application's replay code and data (``study/llm/``, the arenas' votes); a
    stand-in engine's own file."""
    if engine == ENGINE:
        files = [p for p in sorted(_VOTES_ROOT.glob("*.py")) if p.name not in _NOT_NUMBERS]
        files += sorted(p for p in (_VOTES_ROOT.parent / "llm").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        return sha256_files(files, root=_VOTES_ROOT.parent)
    module = importlib.import_module(engine)
    return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()


def seed_of(root: int, arena: str, rep: int) -> np.random.SeedSequence:
    """Replication ``rep`` of ``arena``: the same for every method (common random numbers)."""
    return np.random.SeedSequence(int(root), spawn_key=(zlib.crc32(arena.encode()), int(rep)))


def make_votes_plan(arenas=None, methods=None, *, reps=None, budget=None, quick: bool = False, tops=None,
                    level=None, seed: int = DEFAULT_SEED, engine: str = ENGINE) -> VotesPlan:
    """The plan of a votes study, every argument validated before any work.

    Parameters
    ----------
    arenas, methods : sequence of str, optional
        Default: every arena and every method of the engine.  ``uniform`` is added to the methods
        if missing (it is the reference of every ratio).
    reps, budget : int, optional
        Replications per (arena, method) and the vote cap of one run, for every arena (default:
        the engine's per-arena values, ``quick`` or full).
    quick : bool
        The engine's quick defaults (a laptop, minutes).
    tops : sequence of int, optional
        The k of the decisions (default the engine's ``TOPS``).
    level : float, optional
        The stopping rule's level (default the engine's ``LEVEL``).
    seed : int
        The root seed.

    Raises
    ------
    ValueError
        An unknown arena or method (naming the allowed ones), a non-positive count, a level outside
        (0, 1), a k below 1.
    """
    eng = importlib.import_module(engine)
    arenas = tuple(eng.ARENAS) if not arenas else tuple(dict.fromkeys(eng.check_arena(a) for a in arenas))
    methods = tuple(eng.METHODS) if not methods else tuple(dict.fromkeys(eng.check_method(m) for m in methods))
    if "uniform" not in methods:
        methods = ("uniform",) + methods
    reps = _positive("--reps", reps)
    budget = _positive("--budget", budget)
    tops = tuple(eng.TOPS) if tops is None else tuple(sorted({_positive("--top", k) for k in tops}))
    level = float(eng.LEVEL if level is None else level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"--level must lie in (0, 1), got {level}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {seed!r}")
    return VotesPlan(arenas, methods,
                     {a: reps or eng.default_reps(a, quick=quick) for a in arenas},
                     {a: budget or eng.default_budget(a, quick=quick) for a in arenas},
                     tops, level, int(seed), bool(quick), engine)


def _positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# One task (runs in a Ray worker)
# --------------------------------------------------------------------------------------------

def run_unit(plan: VotesPlan, unit: Unit) -> dict:
    """The replications of one unit: {"decisions": Arrow table, "fixed_budget": Arrow table,
    "cpu_seconds": float}.  Raises whatever a run raises (the driver records it)."""
    eng = importlib.import_module(plan.engine)
    decisions, budget_view, cpu = [], [], 0.0
    for rep in unit.reps:
        run = eng.replay(unit.arena, unit.method, seed_of(plan.seed, unit.arena, rep),
                         budget=plan.budgets[unit.arena], tops=plan.tops, level=plan.level)
        keys = {"arena": unit.arena, "method": unit.method, "rep": rep, "n_items": run.n_items,
                "budget": run.budget, "votes_told": run.votes_told, "looks": run.looks,
                "cpu_seconds": run.cpu_seconds}
        decisions.append(run.decisions.assign(**keys))
        budget_view.append(run.fixed_budget.assign(**{k: keys[k] for k in ("arena", "method", "rep")}))
        cpu += run.cpu_seconds
    return {"decisions": stored.decisions_table(decisions), "fixed_budget": stored.fixed_budget_table(budget_view),
            "cpu_seconds": cpu}


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------

@dataclass
class VotesReport:
    """What a run did: units computed now, found committed, failed (with their errors), whether it
    was interrupted, and where it stored them."""

    out: Path
    computed: int = 0
    reused: int = 0
    failed: list = field(default_factory=list)
    interrupted: bool = False
    wall_seconds: float = 0.0
    task_cpu_seconds: float = 0.0

    @property
    def exit_status(self) -> int:
        return 130 if self.interrupted else (1 if self.failed else 0)

    def summary(self) -> str:
        text = (f"[votes] {self.computed} tasks computed, {self.reused} already stored, {len(self.failed)} failed "
                f"({self.wall_seconds:.0f} s wall, {self.task_cpu_seconds:.0f} s task CPU) -> {self.out}")
        if self.interrupted:
            text += "; interrupted: rerun the same command to resume"
        elif self.failed:
            text += "; rerun the same command to retry the failed tasks"
        return text


def run_votes(plan: VotesPlan, out, *, address=None, num_cpus=None, fresh: bool = False, progress: bool = True,
              log=print) -> VotesReport:
    """Run (or resume) ``plan`` on Ray, storing under ``out/votes``.

    Parameters
    ----------
    plan : VotesPlan
    out : path
        The output folder (the study goes to ``out/votes``).
    address, num_cpus
        As :func:`study.runner.connect` (no address: an embedded local Ray).
    fresh : bool
        Discard what is stored (after checking it is a votes study's folder) and start again.

    Raises
    ------
    study.runner.ConfigMismatch
        Stored results were made with another fingerprint (and ``fresh`` is false).
    """
    with study_lock(out):  # one writer per --out
        return _run_votes(plan, Path(out), address, num_cpus, fresh, progress, log)


def _run_votes(plan, out, address, num_cpus, fresh, progress, log) -> VotesReport:
    root = out / STUDY
    manifest = stored.read_manifest(root)
    fingerprint = plan.fingerprint()
    if manifest is not None and fresh:
        stored.discard(root)
        manifest = None
    if manifest is not None and manifest.get("fingerprint") != fingerprint:
        differ = sorted(k for k in set(fingerprint) | set(manifest.get("fingerprint", {}))
                        if fingerprint.get(k) != manifest.get("fingerprint", {}).get(k))
        raise ConfigMismatch(f"{root} holds a votes study made with other {', '.join(differ)}; use another --out, "
                             "or --fresh to discard it")
    manifest = manifest or {"study": STUDY, "fingerprint": fingerprint, "parts": {}, "runs": []}
    for sub in ("", "decisions", "fixed_budget"):
        make_dir(root / sub)
    units = plan.units()
    done = {u.name for u in units if stored.committed(root, manifest, u.name)}
    todo = [u for u in units if u.name not in done]
    report = VotesReport(root, reused=len(done))
    run_record = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git_commit": git_commit(), "argv": list(sys.argv),
                  "plan": _jsonable_plan(plan), "failures": []}
    manifest["runs"].append(run_record)
    start = time.monotonic()
    if todo:
        log(f"[votes] {len(todo)} tasks to compute ({len(done)} already stored) -> {root}")
        conn = connect(address, num_cpus=num_cpus, log=log)
        run_record["ray"] = conn.mode
        _gather(plan, todo, root, manifest, report, progress, log)
    run_record.update(finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), computed=report.computed,
                      status="interrupted" if report.interrupted else ("failed" if report.failed else "ok"))
    stored.write_manifest(root, manifest)
    report.wall_seconds = time.monotonic() - start
    return report


def _gather(plan, todo, root, manifest, report, progress, log):
    import ray

    task = ray.remote(num_cpus=1, max_retries=0)(run_unit)
    plan_ref = ray.put(plan)
    pending = {task.remote(plan_ref, u): u for u in todo}
    bar = Progress(STUDY, len(todo), progress, log)
    try:
        with Interrupts(STUDY, log) as interrupts:
            while pending and not interrupts.requested:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
                if not ready:
                    bar.update(0, 0)
                    continue
                unit = pending.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except Exception as exc:  # noqa: BLE001 -- a failed task is recorded, the others go on
                    failure = {**asdict(unit), "error": _one_line(exc), "traceback": traceback.format_exc()[-4000:]}
                    report.failed.append(failure)
                    manifest["runs"][-1]["failures"].append(failure)
                    log(f"[votes] failed: {unit.arena} {unit.method} reps {unit.reps[0]}-{unit.reps[-1]}: "
                        f"{failure['error']}")
                    bar.update(1, 1)
                    continue
                manifest["parts"][unit.name] = {
                    "decisions": atomic_write_table(result["decisions"], root / "decisions" / f"{unit.name}.parquet"),
                    "fixed_budget": atomic_write_table(result["fixed_budget"],
                                                       root / "fixed_budget" / f"{unit.name}.parquet"),
                    "cpu_seconds": result["cpu_seconds"]}
                stored.write_manifest(root, manifest)  # the commit record: a part counts once named here
                report.computed += 1
                report.task_cpu_seconds += result["cpu_seconds"]
                bar.update(1, 0)
            if pending:
                report.interrupted = True
                for ref in pending:
                    ray.cancel(ref, force=True)
    finally:
        bar.close()


def _one_line(exc) -> str:
    cause = getattr(exc, "cause", None) or exc
    text = f"{type(cause).__name__}: {cause}".strip().splitlines()
    return text[0][:300] if text else type(cause).__name__


def _jsonable_plan(plan: VotesPlan) -> dict:
    return {"arenas": list(plan.arenas), "methods": list(plan.methods), "reps": dict(plan.reps),
            "budgets": dict(plan.budgets), "tops": list(plan.tops), "level": plan.level, "seed": plan.seed,
            "quick": plan.quick}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python jobs/votes.py",
        description="Votes to a decision: how many votes each pair-choice method needs before the anytime-valid "
                    "stopping rule decides the top k, and the error it pays (docs/votes.md).")
    p.add_argument("--out", default="outputs", help="output folder; the study goes to OUT/votes (default: outputs)")
    p.add_argument("--quick", action="store_true", help="small budgets and few replications (a laptop, minutes)")
    p.add_argument("--arenas", nargs="+", metavar="ARENA", help="arenas to run (default: all)")
    p.add_argument("--methods", nargs="+", metavar="METHOD", help="methods to run (default: all; uniform is always run)")
    p.add_argument("--reps", type=int, help="replications per arena and method (default: the arena's)")
    p.add_argument("--budget", type=int, help="vote cap of one run, every arena (default: the arena's)")
    p.add_argument("--top", type=int, nargs="+", metavar="K", help="the k of the top-k decisions (default: 1 3 10)")
    p.add_argument("--level", type=float, help="the stopping rule's level (default: 0.95)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"root seed (default: {DEFAULT_SEED})")
    p.add_argument("--address", help="join this Ray cluster ('auto', host:port); default: an embedded local Ray")
    p.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray (default: all of this machine)")
    p.add_argument("--fresh", action="store_true", help="discard the stored votes study under --out first")
    p.add_argument("--figures-only", action="store_true", help="draw the table and figures from what is stored")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
    return p


def main(argv=None) -> int:
    """``python jobs/votes.py``: run the study, then write ``votes.md`` (the table) and the figures."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.figures_only and args.fresh:
        parser.error("--figures-only and --fresh are mutually exclusive")
    try:
        plan = make_votes_plan(args.arenas, args.methods, reps=args.reps, budget=args.budget, quick=args.quick,
                               tops=args.top, level=args.level, seed=args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    root = Path(args.out) / STUDY
    status = 0
    if not args.figures_only:
        try:
            report = run_votes(plan, args.out, address=args.address, num_cpus=args.num_cpus, fresh=args.fresh,
                               progress=not args.no_progress)
        except (ConfigMismatch, stored.StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(report.summary())
        status = report.exit_status
    try:
        written = stored.write_report(root, plan_arenas=plan.arenas, plan_methods=plan.methods)
    except stored.StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"[votes] wrote {path}")
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
