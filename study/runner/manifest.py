"""The manifest of a study directory: its configuration, fingerprint and the record of every run
(``out/<study>/_manifest.json``, written atomically; :mod:`study.results.files`).

Run statuses: ``running`` (a run in progress; found by a later run, which holds the lock, it means
the run died: ``died``), ``complete``, ``failed`` (some replication failed), ``interrupted`` (a
signal), ``error`` (the driver stopped on an exception).  The study's own ``status`` is
``complete`` once every replication of the plan is stored, else ``incomplete`` or ``interrupted``.
"""
from __future__ import annotations

import datetime as _dt
import os
import socket
import subprocess
import sys
from pathlib import Path

from ..results import storage
from ..results.schema import COST_SCHEMA, FAILURE_SCHEMA, INTERVAL_SCHEMA, STORAGE_FORMAT, TRAJECTORY_SCHEMA
from .catalogue import STUDIES
from .numerics import describe, numerics

UNRECORDED = "unrecorded"  # replications committed before their numerics were recorded


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


COMMIT_VARIABLE = "STUDY_GIT_COMMIT"  # the commit of a copy without .git (``ray job submit --working-dir .``)


def git_commit():
    """The source checkout's commit (``-dirty`` when tracked files changed); where the source is a
    copy without ``.git`` (a job submitted with ``--working-dir``), the commit named by
    ``STUDY_GIT_COMMIT``; else None."""
    try:
        root = Path(__file__).resolve().parent.parent.parent
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if res.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return res.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    given = os.environ.get(COMMIT_VARIABLE, "").strip()
    return given if given and len(given) <= 80 and given.replace("-", "").isalnum() else None


def open_run(plan, existing, fingerprint: dict, run_id: str, record_intervals: bool, stored_before: int):
    """(manifest, run record) for a run starting now: the stored manifest (or a new one) updated
    with the plan's configuration, earlier runs still marked ``running`` marked ``died`` (the
    caller holds the lock), and a new run record appended."""
    spec = STUDIES[plan.study]
    manifest = existing or {
        "study": plan.study,
        "fingerprint": fingerprint,
        "description": spec.description,
        "schema": {"trajectory": TRAJECTORY_SCHEMA.names, "intervals": INTERVAL_SCHEMA.names,
                   "failures": FAILURE_SCHEMA.names, "costs": COST_SCHEMA.names},
        "runs": [],
    }
    for old in manifest["runs"]:
        if old.get("status") == "running":
            old["status"] = "died"
    settings = sorted({c.setting for c in plan.cells})
    manifest.update({"figures": spec.figures, "title": spec.title,
                     "root_seed": plan.root_seed, "reps": plan.reps, "settings": settings,
                     "methods": list(dict.fromkeys(c.method for c in plan.cells)),
                     "M": {s: sorted({c.M for c in plan.cells if c.setting == s}) for s in settings},
                     "overrides": dict(plan.overrides), "record_intervals": bool(record_intervals),
                     "package_version": fingerprint["package_version"], "git_commit": git_commit(),
                     "storage_format": STORAGE_FORMAT})
    run = {"run_id": run_id, "started": now(), "requested": plan.n_replications, "stored_before": stored_before,
           "status": "running", "argv": sys.argv, "host": socket.gethostname(), "pid": os.getpid(),
           "git_commit": manifest["git_commit"]}
    manifest["runs"].append(run)
    manifest["status"] = "running"
    return manifest, run


def close_run(manifest: dict, run: dict, *, seconds: float, computed: int, failed: int, finished: bool,
              interrupted: bool, signals, left: int) -> None:
    """Record how the run ended (see the module docstring for the statuses)."""
    run.update({"finished": now(), "wall_seconds": round(seconds, 3), "computed": computed, "failed": failed,
                "status": "interrupted" if interrupted else ("error" if not finished else
                                                             "failed" if failed else "complete")})
    if signals:
        run["signals"] = list(signals)
    manifest["status"] = "interrupted" if interrupted else "complete" if finished and left == 0 else "incomplete"
    manifest["wall_seconds_total"] = round(sum(r.get("wall_seconds", 0) for r in manifest["runs"]), 3)


def stored_numerics(manifest) -> dict:
    """{numerics key: what it names} of the replications a stored manifest records."""
    return {k: v for k, v in ((manifest or {}).get("numerics") or {}).items() if isinstance(v, dict)}


def mixing_warning(study: str, new: dict, others: dict, stored: bool) -> str:
    """The warning of a run whose replications come from numerics (``new``) other than those of
    replications already stored or computed (``others``: key -> info)."""
    where = "stored in this study's results" if stored else "computed by other workers of this run"
    theirs = "; ".join(describe(info) for info in others.values())
    return (f"[{study}] warning: these replications are computed with {describe(new)}, the ones {where} with "
            f"{theirs}: the table mixes BLAS kernels or SIMD levels, so its numbers are not those of one machine "
            "(each replication is still a valid draw). Identical numbers on any machine: --pin-numerics "
            "(docs/core.md#reproducibility); the manifest records which replications came from which")


def record_numerics(manifest: dict, run: dict, out, study: str, seen: dict, by_node: dict) -> None:
    """Record in ``manifest`` (and this ``run``) what the study's replications were computed with:
    ``numerics`` (key -> the BLAS libraries, versions, kernels, numpy SIMD, and how many stored
    replications each computed, counted from the commit records) and ``numerics_mixed`` (True when
    more than one; None when some were stored before numerics were recorded)."""
    known = {**stored_numerics(manifest), **seen}
    counts: dict = {}
    try:
        commits = storage.read_commits(out, study)
    except storage.StorageError:  # a damaged record: the next run's verification reports it
        commits = []
    for _, record in commits:
        recorded = record.get("numerics")
        if not isinstance(recorded, dict):
            recorded = {UNRECORDED: len(record.get("keys", []))}
        for key, n in recorded.items():
            counts[key] = counts.get(key, 0) + (n if isinstance(n, int) else 0)
    table = {key: {**{k: v for k, v in known.get(key, {}).items() if k != "replications"}, "replications": n}
             for key, n in sorted(counts.items()) if n}
    manifest["numerics"] = table
    recorded = [k for k in table if k != UNRECORDED]
    manifest["numerics_mixed"] = None if UNRECORDED in table and recorded else len(recorded) > 1
    here = numerics()
    run["driver_numerics"] = here["key"]
    run["pinned"] = bool(here["pinned"])
    run["numerics"] = sorted(seen)
    if by_node:
        run["numerics_by_node"] = {str(node): key for node, key in sorted(by_node.items(), key=str)}
