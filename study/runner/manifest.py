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

from ..results.schema import FAILURE_SCHEMA, INTERVAL_SCHEMA, STORAGE_FORMAT, TRAJECTORY_SCHEMA
from .catalogue import STUDIES


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def git_commit():
    """The source checkout's commit (``-dirty`` when tracked files changed), or None."""
    try:
        root = Path(__file__).resolve().parent.parent.parent
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if res.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return res.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


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
                   "failures": FAILURE_SCHEMA.names},
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
