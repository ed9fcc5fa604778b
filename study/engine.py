"""The Ray study engine: fan replications out as remote tasks, gather them into Parquet, resume.

A *study* (``regret``, ``coverage``, ``msweep``) is a grid of *cells* -- (setting, method, M) with
the setting's overrides -- times ``reps`` replications.  The *replay* studies ``llm``, ``arena`` and
``byo`` (the LLM-ranking application, :mod:`study.llm`) have one setting each, built from data by
their ``source`` (:func:`study.llm.runs.replay_source`), which also supplies the ``replicate`` hook
(shipped to the workers with the tasks) and the provenance (hashes of the replay's code and data)
that joins the fingerprint.  Every replication has a key
``(setting, method, M, rep)`` and a seed that depends only on the root seed, the study, the base
setting name and ``rep`` (:func:`replication_seed`), so the numbers never depend on the worker
count, the batch size or the order in which tasks finish, and all methods (and, in the M-sweep, all
values of M) of replication ``rep`` share one environment (common random numbers).

Output layout under ``out`` (only the driver writes; every file appears atomically via a temporary
``_tmp-*`` file and ``os.replace``)::

    out/<study>/_manifest.json                 configuration, versions, seed, Ray resources, runs
    out/<study>/part-<run>-<n>.parquet         trajectories   (pandas.read_parquet("out/<study>"))
    out/<study>_intervals/part-<run>-<n>.parquet   confidence intervals (when recorded)
    out/<study>_failures/part-<run>-<n>.parquet    failed replications
    out/<study>/_diagrams.npz                  replay studies: ranking-diagram snapshots (study.figures)

Files are flat (not hive-partitioned), so every column comes back with its stored dtype.  Row
order inside the files is arbitrary; :func:`load` returns the table sorted by its key columns.

Schema (one row per replication and step ``t = 1..T``) -- trajectories::

    study str, setting str, method str, M int32, T0 int32, T int32, rep int32, seed int64,
    t int32, major int32, other int32, explored bool, regret float64, avg_regret float64,
    rel_error float64

``setting`` is the base setting name ("A", "B"); overrides given with ``--set`` are recorded in the
manifest.  ``major``/``other`` are the compared items (0-based), ``explored`` marks an exploration
step, ``regret`` the per-step regret, ``avg_regret`` R(t) = (1/t) sum_{s<=t} regret_s, and
``rel_error`` max_i ||theta*_i - theta_i(t)|| / max_i ||theta*_i||.  Intervals (one row per grid
time, item and dimension from the first grid time the debiased CI exists)::

    study str, setting str, method str, M int32, rep int32, seed int64, t int32, item int32,
    dim int32, estimate float64, se float64, lower float64, upper float64, truth float64,
    covered bool

Failures: ``study, setting, method, M, rep, seed, error, traceback, run_id``.  A replication is
reproduced exactly by ``study.run_replication(setting, method, seed=row.seed, M=row.M, **overrides)``
with the overrides from the manifest.

Resume: a rerun computes only the keys missing from the trajectory dataset (failed replications
are therefore retried).  If the stored manifest's fingerprint (resolved settings, methods, root
seed, package version) differs from the requested one the engine refuses (``ConfigMismatch``)
unless ``fresh=True``, which deletes this study's three datasets first.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .result import INTERVAL_COLUMNS, TRAJECTORY_COLUMNS
from .settings import METHODS, SETTINGS, check_method, resolve_setting

DEFAULT_SEED = 20250101
STUDY_NAMES = ("regret", "coverage", "msweep")  # the paper's simulation studies (jobs/paper.py)
REPLAY_STUDIES = ("llm", "arena", "byo")  # the LLM-ranking application (jobs/llm_ranking.py)
KEY_COLUMNS = ("setting", "method", "M", "rep")


@dataclass(frozen=True)
class StudyDefaults:
    settings: tuple
    methods: tuple
    reps: int
    overrides: dict
    m_values: dict | None = None  # msweep only: base setting name -> tuple of M
    description: str = ""
    # Replay studies: "module:function" returning, for a setting name (and the options given to
    # make_plan as ``source``), an object with ``setting`` (the base Setting), ``replicate`` (the
    # hook), ``provenance`` (dict, joins the fingerprint) and ``fixed_fields`` (not overridable).
    source: str | None = None


STUDIES = {
    "regret": StudyDefaults(
        settings=("A", "B"), methods=METHODS, reps=200, overrides={"ci_every": 0},
        description="Regret and estimation error, Settings A and B, all five methods (paper Figure 1)."),
    "coverage": StudyDefaults(
        settings=("A", "B"), methods=("RB",), reps=500, overrides={"ci_every": 10},
        description="Coverage of the 95% debiased CIs on a t grid, RB (paper Figures 2-3)."),
    "msweep": StudyDefaults(
        settings=("A", "B"), methods=METHODS, reps=200, overrides={"ci_every": 0},
        m_values={"A": (1, 10, 20, 30), "B": (20, 50, 80)},
        description="Regret and error as the per-step comparison budget M varies (paper appendix)."),
    "llm": StudyDefaults(
        settings=("llm",), methods=METHODS, reps=50, overrides={"ci_every": 0},
        source="study.llm.runs:replay_source",
        description="LLM ranking replay: five LLMs on 100 MMLU anatomy questions, GENERATED judgments "
                    "(paper section 'Applications to Language Model Ranking')."),
    "arena": StudyDefaults(
        settings=("arena",), methods=METHODS, reps=50, overrides={"ci_every": 0},
        source="study.llm.runs:replay_source",
        description="Chatbot Arena replay: 129 models, real human votes, d = 1."),
    "byo": StudyDefaults(
        settings=("byo",), methods=METHODS, reps=50, overrides={"ci_every": 0},
        source="study.llm.runs:replay_source",
        description="Bring-your-own judgments replay (a CSV/Parquet file of pairwise judgments)."),
}

_INT32 = pa.int32()
TRAJECTORY_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("T0", _INT32), ("T", _INT32), ("rep", _INT32), ("seed", pa.int64()),
    ("t", _INT32), ("major", _INT32), ("other", _INT32), ("explored", pa.bool_()),
    ("regret", pa.float64()), ("avg_regret", pa.float64()), ("rel_error", pa.float64()),
])
INTERVAL_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("rep", _INT32), ("seed", pa.int64()),
    ("t", _INT32), ("item", _INT32), ("dim", _INT32), ("estimate", pa.float64()),
    ("se", pa.float64()), ("lower", pa.float64()), ("upper", pa.float64()),
    ("truth", pa.float64()), ("covered", pa.bool_()),
])
FAILURE_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("rep", _INT32), ("seed", pa.int64()), ("error", pa.string()),
    ("traceback", pa.string()), ("run_id", pa.string()),
])


class ConfigMismatch(RuntimeError):
    """Stored results were produced by a different configuration."""


# --------------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------------

def stable_int(text: str) -> int:
    """A deterministic 32-bit integer for a string (first 4 bytes of its SHA-256), never hash()."""
    return int.from_bytes(hashlib.sha256(str(text).encode("utf-8")).digest()[:4], "big")


def replication_seed(root_seed: int, study: str, setting: str, rep: int) -> int:
    """The seed of replication ``rep`` of base setting ``setting`` in ``study``.

    Independent of method and M: every method (and every M of the sweep) sees the same
    environment in replication ``rep``.
    """
    ss = np.random.SeedSequence(int(root_seed), spawn_key=(stable_int(study), stable_int(setting), int(rep)))
    return int(ss.generate_state(1, np.uint64)[0]) & (2 ** 63 - 1)


# --------------------------------------------------------------------------------------------
# The plan: which replications a study consists of
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    setting: str            # base setting name
    method: str
    M: int
    overrides: tuple        # sorted (field, value) pairs applied to SETTINGS[setting], M included
    base: object = field(default=None, compare=False, repr=False)  # replay studies: the base Setting

    def resolve(self):
        return resolve_setting(self.setting if self.base is None else self.base, **dict(self.overrides))

    @property
    def label(self) -> str:
        return f"{self.setting}/{self.method}/M={self.M}"


@dataclass(frozen=True)
class Plan:
    study: str
    root_seed: int
    reps: int
    cells: tuple
    overrides: tuple        # user overrides (--set), before the study's own
    provenance: tuple = ()  # replay studies: sorted (key, value) pairs of the source's provenance
    replicate: object = field(default=None, compare=False, repr=False)  # replay studies: the hook

    @property
    def n_replications(self) -> int:
        return len(self.cells) * self.reps

    def keys(self):
        for cell in self.cells:
            for rep in range(self.reps):
                yield (cell.setting, cell.method, cell.M, rep)

    def fingerprint(self) -> dict:
        """Everything that affects the numbers (not ``reps``: more reps only add keys)."""
        from . import __version__
        fingerprint = {
            "study": self.study,
            "root_seed": int(self.root_seed),
            "package_version": __version__,
            "core_source_sha256": core_source_hash(),
            "cells": [{"setting": c.setting, "method": c.method, "M": c.M,
                       "resolved_setting": _setting_record(c)} for c in self.cells],
        }
        if self.provenance:
            fingerprint["replay"] = _jsonable(dict(self.provenance))
        return fingerprint


def _setting_record(cell) -> dict:
    """The resolved setting as JSON; for a replay cell the data-sized fields (truth, graph) are
    recorded by their SHA-256 (the arena graph alone has 3,460 edges)."""
    record = _jsonable(cell.resolve().to_dict())
    if cell.base is not None:
        for key in ("truth", "edges"):
            if isinstance(record.get(key), list):
                record[key] = {"sha256": hashlib.sha256(json.dumps(record[key]).encode()).hexdigest()}
    return record


# Modules that do not influence the numbers of a replication (the engine and its front ends).
_NON_CORE = {"__init__.py", "engine.py", "cli.py", "figures.py", "summary.py", "bench_parallel.py", "bench.py"}


def core_source_hash() -> str:
    """SHA-256 over the source of the modules that compute a replication (study/*.py except the
    engine, its front ends and benchmarks), so that results of edited core code are never mixed
    with stored ones even when the package version did not change."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.glob("*.py")):
        if path.name not in _NON_CORE:
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def _import(path: str):
    import importlib
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def make_plan(study: str, *, settings=None, methods=None, reps=None, seed=DEFAULT_SEED,
              overrides=None, m_values=None, source=None) -> Plan:
    """Validate a study's configuration (no Ray involved) and list its cells.

    ``overrides`` are Setting fields applied to every setting (validated by ``Setting.replace``);
    ``m_values`` (msweep only) replaces the per-setting M grid with one list for all settings.
    ``source`` (replay studies only) are keyword options of the study's source, e.g.
    ``{"judgments": "my.csv"}`` for ``byo``; the source reads and validates its data here.
    Raises ``ValueError`` with a clear message on any bad input.
    """
    if study not in STUDIES:
        raise ValueError(f"unknown study {study!r}; allowed: {list(STUDIES)}")
    spec = STUDIES[study]
    settings = tuple(spec.settings if settings is None else settings)
    methods = tuple(spec.methods if methods is None else methods)
    if not settings:
        raise ValueError("at least one setting is required")
    if not methods:
        raise ValueError("at least one method is required")
    allowed = spec.settings if spec.source is not None else tuple(sorted(SETTINGS))
    for name in settings:
        if name not in allowed:
            raise ValueError(f"unknown setting {name!r}; allowed: {sorted(allowed)}")
    if source is not None and spec.source is None:
        raise ValueError(f"study {study!r} takes no source options (only {list(REPLAY_STUDIES)} do)")
    for method in methods:
        check_method(method)
    if len(set(settings)) != len(settings) or len(set(methods)) != len(methods):
        raise ValueError("settings and methods must not repeat")
    reps = spec.reps if reps is None else reps
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    user = dict(overrides or {})
    if "name" in user:
        raise ValueError("the setting field 'name' cannot be overridden; choose settings with --settings")
    if spec.m_values is not None and "M" in user:
        raise ValueError("the M-sweep sets M itself; use --m-values instead of overriding M")
    if m_values is not None:
        if spec.m_values is None:
            raise ValueError("m_values applies to the msweep study only; override M with --set M=...")
        m_values = tuple(m_values)
        if not m_values or any(isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1
                               for m in m_values):
            raise ValueError(f"M values must be positive integers, got {list(m_values)}")
    bases, provenance, hook = {}, {}, None
    if spec.source is not None:  # a replay study: its setting and hook come from data
        for name in settings:
            src = _import(spec.source)(name, **dict(source or {}))  # ValueError on bad data
            fixed = sorted(set(user) & set(src.fixed_fields))
            if fixed:
                adjustable = [f.name for f in dataclasses.fields(src.setting) if f.name not in src.fixed_fields]
                raise ValueError(f"the setting field(s) {fixed} are fixed by the {study!r} replay (data, or drawn "
                                 f"by the environment); adjustable: {adjustable}")
            bases[name], hook = src.setting, src.replicate
            provenance.update(src.provenance)
    cells = []
    for name in settings:
        base = bases.get(name)
        default_M = (base or SETTINGS[name]).M
        merged = {**spec.overrides, **user}
        if spec.m_values is not None:
            grid = m_values if m_values is not None else spec.m_values.get(name, (default_M,))
        else:
            grid = (merged.get("M", default_M),)
        for M in grid:
            with_m = {**merged, "M": int(M)}
            try:
                resolve_setting(base or name, **with_m)  # validates every field (and combinations)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"setting {name} with overrides {with_m}: {exc}") from None
            for method in methods:
                cells.append(Cell(name, method, int(M), tuple(sorted(with_m.items())), base=base))
    return Plan(study=study, root_seed=int(seed), reps=int(reps), cells=tuple(cells),
                overrides=tuple(sorted(user.items())), provenance=tuple(sorted(provenance.items())),
                replicate=hook)


# --------------------------------------------------------------------------------------------
# Worker side: one batch = several replications of one cell
# --------------------------------------------------------------------------------------------

_SETTING_CACHE: dict = {}


def _default_replicate(setting, method, seed):
    from . import run_replication
    return run_replication(setting, method, seed)


def _trajectory_table(study, cell, setting, rep, seed, result) -> pa.Table:
    traj = result.trajectory
    n = len(traj["t"])
    const = {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
             "T0": setting.T0, "T": setting.T, "rep": rep, "seed": seed}
    arrays = []
    for f in TRAJECTORY_SCHEMA:
        if f.name in const:
            arrays.append(pa.array([const[f.name]] * n, type=f.type) if n else pa.array([], type=f.type))
        else:
            arrays.append(pa.array(np.asarray(traj[f.name]), type=f.type, safe=True)
                          if f.type != pa.bool_() else pa.array(np.asarray(traj[f.name]).astype(bool)))
    return pa.Table.from_arrays(arrays, schema=TRAJECTORY_SCHEMA)


def _interval_table(study, cell, rep, seed, result) -> pa.Table:
    ints = result.intervals
    n = len(ints["t"]) if ints else 0
    const = {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
             "rep": rep, "seed": seed}
    arrays = []
    for f in INTERVAL_SCHEMA:
        if f.name in const:
            arrays.append(pa.array([const[f.name]] * n, type=f.type))
        elif f.type == pa.bool_():
            arrays.append(pa.array(np.asarray(ints[f.name]).astype(bool) if n else [], type=f.type))
        else:
            arrays.append(pa.array(np.asarray(ints[f.name]) if n else [], type=f.type))
    return pa.Table.from_arrays(arrays, schema=INTERVAL_SCHEMA)


def run_batch(study: str, cell: Cell, reps_seeds, replicate=None, record_intervals=True,
              run_id: str = "") -> dict:
    """Run replications ``reps_seeds = [(rep, seed), ...]`` of one cell, in this process.

    An exception in one replication is caught and returned as a failure record; the others still
    run.  Returns ``{"trajectory": Table, "intervals": Table, "failures": [dict], "seconds": s}``.
    """
    start = time.perf_counter()
    cpu_start = time.process_time()
    replicate = replicate or _default_replicate
    if cell.base is not None:  # a replay's setting: built from data, not cached by name
        setting = cell.resolve()
    else:
        key = cell.overrides + (("__name", cell.setting),)
        setting = _SETTING_CACHE.get(key)
        if setting is None:
            setting = _SETTING_CACHE[key] = cell.resolve()
    trajs, ints, failures = [], [], []
    for rep, seed in reps_seeds:
        try:
            result = replicate(setting, cell.method, seed)
            traj = _trajectory_table(study, cell, setting, rep, seed, result)
            interval = _interval_table(study, cell, rep, seed, result) if record_intervals else None
        except Exception as exc:  # noqa: BLE001 -- recorded, the batch goes on
            failures.append(_failure(study, cell, rep, seed, f"{type(exc).__name__}: {exc}",
                                     traceback.format_exc(), run_id))
            continue
        trajs.append(traj)
        if interval is not None and interval.num_rows:
            ints.append(interval)
    return {
        "trajectory": pa.concat_tables(trajs) if trajs else TRAJECTORY_SCHEMA.empty_table(),
        "intervals": pa.concat_tables(ints) if ints else INTERVAL_SCHEMA.empty_table(),
        "failures": failures,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
        "node": _node_id(),
    }


def _node_id() -> str:
    try:
        import ray
        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        pass
    return socket.gethostname()


def _failure(study, cell, rep, seed, error, tb, run_id) -> dict:
    return {"study": study, "setting": cell.setting, "method": cell.method, "M": cell.M,
            "rep": int(rep), "seed": int(seed), "error": error, "traceback": tb, "run_id": run_id}


_REMOTE = None


def _remote_run_batch():
    global _REMOTE
    if _REMOTE is None:
        import ray
        _REMOTE = ray.remote(num_cpus=1, max_retries=3)(run_batch)
    return _REMOTE


# --------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------

def dataset_dirs(out, study) -> dict:
    out = Path(out)
    return {"trajectory": out / study, "intervals": out / f"{study}_intervals",
            "failures": out / f"{study}_failures"}


def manifest_path(out, study) -> Path:
    return Path(out) / study / "_manifest.json"


def _parts(directory: Path):
    return sorted(p for p in directory.glob("part-*.parquet")) if directory.is_dir() else []


def _atomic_write_table(table: pa.Table, path: Path):
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex}-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def _atomic_write_json(obj, path: Path):
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex}.json")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def read_manifest(out, study):
    path = manifest_path(out, study)
    return json.loads(path.read_text()) if path.exists() else None


def _cleanup(dirs):
    """Drop temporary files of a crashed writer and interval parts whose trajectory part (the
    commit marker, written last) never appeared."""
    for d in dirs.values():
        if d.is_dir():
            for tmp in d.glob("_tmp-*"):
                tmp.unlink(missing_ok=True)
    committed = {p.name for p in _parts(dirs["trajectory"])}
    for p in _parts(dirs["intervals"]):
        if p.name not in committed:
            p.unlink()


def check_stored(plan: Plan, out):
    """The stored manifest of ``plan.study`` under ``out`` (None if nothing is stored); raises
    ``ConfigMismatch`` if the stored results come from a different configuration."""
    out = Path(out).expanduser().resolve()
    dirs = dataset_dirs(out, plan.study)
    existing = read_manifest(out, plan.study)
    if existing is not None and existing.get("fingerprint") != plan.fingerprint():
        raise ConfigMismatch(
            f"{dirs['trajectory']} holds results of a different configuration "
            f"({_describe_difference(existing.get('fingerprint'), plan.fingerprint())}). "
            "Rerun with --fresh to discard them, or choose another --out.")
    if existing is None and any(_parts(d) for d in dirs.values()):
        raise ConfigMismatch(f"{dirs['trajectory']} holds results but no _manifest.json; "
                             "rerun with --fresh to discard them, or choose another --out.")
    return existing


def stored_keys(out, study) -> set:
    """Keys (setting, method, M, rep) present in the trajectory dataset."""
    parts = _parts(dataset_dirs(out, study)["trajectory"])
    if not parts:
        return set()
    table = pq.ParquetDataset([str(p) for p in parts]).read(columns=list(KEY_COLUMNS))
    keys = table.group_by(list(KEY_COLUMNS)).aggregate([]).to_pydict()
    return set(zip(keys["setting"], keys["method"], keys["M"], keys["rep"]))


class _Writer:
    """Buffers batch results in the driver and flushes them as one part per dataset."""

    def __init__(self, dirs, run_id):
        self.dirs = dirs
        self.run_id = run_id
        self.seq = 0
        self.traj, self.ints, self.fails = [], [], []
        self.rows = 0
        self.last_flush = time.monotonic()
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)

    def add(self, out: dict):
        if out["trajectory"].num_rows:
            self.traj.append(out["trajectory"])
        if out["intervals"].num_rows:
            self.ints.append(out["intervals"])
        self.fails.extend(out["failures"])
        self.rows += out["trajectory"].num_rows + out["intervals"].num_rows

    def due(self, max_rows, max_seconds) -> bool:
        return self.rows >= max_rows or (time.monotonic() - self.last_flush) >= max_seconds

    def flush(self):
        if not (self.traj or self.ints or self.fails):
            return
        name = f"part-{self.run_id}-{self.seq:05d}.parquet"
        self.seq += 1
        # Intervals and failures first, trajectories last: a trajectory part marks the batch done.
        if self.ints:
            _atomic_write_table(pa.concat_tables(self.ints), self.dirs["intervals"] / name)
        if self.fails:
            _atomic_write_table(pa.Table.from_pylist(self.fails, schema=FAILURE_SCHEMA),
                                self.dirs["failures"] / name)
        if self.traj:
            _atomic_write_table(pa.concat_tables(self.traj), self.dirs["trajectory"] / name)
        self.traj, self.ints, self.fails = [], [], []
        self.rows = 0
        self.last_flush = time.monotonic()


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

def load(out, study, what: str = "trajectory", columns=None, filter=None):
    """The stored table of ``study`` as a pandas DataFrame, sorted by its keys.

    ``what`` is ``"trajectory"``, ``"intervals"`` or ``"failures"``; ``columns`` (a list) and
    ``filter`` (a ``pyarrow.dataset`` expression, e.g. ``pc.field("t") == pc.field("T")``) are
    applied while reading.  Failures are the current ones only: failures of replications that
    have since succeeded are dropped, and only the most recent record per key is kept.
    """
    import pyarrow.dataset as ds

    dirs = dataset_dirs(out, study)
    if what not in dirs:
        raise ValueError(f"what must be one of {list(dirs)}, got {what!r}")
    schema = {"trajectory": TRAJECTORY_SCHEMA, "intervals": INTERVAL_SCHEMA,
              "failures": FAILURE_SCHEMA}[what]
    parts = _parts(dirs[what])
    if what == "intervals":  # only committed batches
        committed = {p.name for p in _parts(dirs["trajectory"])}
        parts = [p for p in parts if p.name in committed]
    if columns is not None:
        sort_cols = [c for c in KEY_COLUMNS + ("t", "item", "dim") if c in schema.names]
        columns = list(dict.fromkeys(list(columns) + sort_cols))
    if parts:
        table = ds.dataset([str(p) for p in parts], schema=schema, format="parquet").to_table(
            columns=columns, filter=filter)
    else:
        table = schema.empty_table()
        if columns is not None:
            table = table.select(columns)
    df = table.to_pandas()
    if what == "failures":
        if len(df):
            done = stored_keys(out, study)
            mask = [k not in done for k in zip(df.setting, df.method, df.M, df.rep)]
            df = df[mask].drop_duplicates(list(KEY_COLUMNS), keep="last")
        return df.sort_values(list(KEY_COLUMNS)).reset_index(drop=True)
    sort = [c for c in list(KEY_COLUMNS) + ["t", "item", "dim"] if c in df.columns]
    return df.sort_values(sort, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Ray connection
# --------------------------------------------------------------------------------------------

@dataclass
class RayConnection:
    started_here: bool
    mode: str
    resources: dict = field(default_factory=dict)


_CONNECTED: dict = {}  # job id of the driver connect() started -> how (recorded in manifests)


def _job_id(ray) -> str:
    return str(ray.get_runtime_context().get_job_id())


def connect(address=None, num_cpus=None, log=print) -> RayConnection:
    """Join or start Ray.

    * already initialised in this process: reuse it (its mode is the one connect() used for it,
      e.g. "embedded" for every study of ``jobs/paper.py``; "existing" if someone else started it);
    * ``address`` given ("auto", "host:port", "ray://host:port"): join that cluster;
    * no address but ``RAY_ADDRESS`` set (inside ``ray job submit``): join the job's cluster;
    * otherwise start an embedded local Ray with ``num_cpus`` CPUs (all by default).
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return RayConnection(False, _CONNECTED.get(_job_id(ray), "existing"), _resources(ray))
    kwargs = {"include_dashboard": False, "log_to_driver": True}
    if address is None and os.environ.get("RAY_ADDRESS"):
        address, mode = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    elif address is None:
        address, mode = "local", "embedded"
        if num_cpus is not None:
            kwargs["num_cpus"] = int(num_cpus)
    else:
        mode = "client" if str(address).startswith("ray://") else "cluster"
    if mode != "embedded":
        kwargs.pop("include_dashboard")
        if num_cpus is not None:
            log(f"note: --num-cpus is ignored when joining an existing cluster ({address})")
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise ConnectionError(
            f"could not connect to a Ray cluster at {address!r}: {exc}\n"
            "Start one with `ray start --head` (same RAY_AUTH_MODE as this shell), or omit "
            "--address to run on an embedded local Ray.") from None
    _CONNECTED[_job_id(ray)] = mode
    return RayConnection(True, mode, _resources(ray))


def _resources(ray) -> dict:
    try:
        res = ray.cluster_resources()
        return {k: v for k, v in res.items() if not k.startswith("node:")} | {
            "nodes": len([n for n in ray.nodes() if n.get("Alive")])}
    except Exception:  # noqa: BLE001
        return {}


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------

@dataclass
class StudyReport:
    study: str
    out: str
    total: int
    stored_before: int
    computed: int
    failed: int
    seconds: float
    interrupted: bool
    failures: list

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.interrupted

    def summary(self) -> str:
        state = "interrupted" if self.interrupted else ("FAILED" if self.failed else "done")
        text = (f"[{self.study}] {state}: {self.computed} replications computed, {self.failed} failed, "
                f"{self.stored_before} already stored, {self.total} in the study; "
                f"{self.seconds:.1f} s -> {Path(self.out) / self.study}")
        for f in self.failures[:10]:
            text += (f"\n  failed {f['setting']}/{f['method']}/M={f['M']} rep={f['rep']} "
                     f"seed={f['seed']}: {f['error']}")
        if len(self.failures) > 10:
            text += f"\n  ... and {len(self.failures) - 10} more (see {self.study}_failures/)"
        return text


def choose_batch_size(n_todo: int, n_cpus: int) -> int:
    """About 8 tasks per CPU (load balance) but at most 25 replications per task."""
    return max(1, min(25, math.ceil(n_todo / max(1, 8 * n_cpus))))


def run_study(plan: Plan, out, *, address=None, num_cpus=None, fresh=False, replicate=None,
              record_intervals=None, batch_size=None, max_in_flight=None, progress=True,
              flush_rows=500_000, flush_seconds=30.0, stop_after_batches=None,
              log=None) -> StudyReport:
    """Run (or resume) ``plan``, writing Parquet under ``out``.  See the module docstring.

    ``replicate(setting, method, seed) -> ReplicationResult`` defaults to the plan's hook (replay
    studies) or ``study.run_replication`` (a different callable must be importable on the workers;
    it is pickled once and shipped to them through the object store, with any data it carries).
    ``stop_after_batches`` stops early after that many batches are stored (simulates an
    interruption; used by the tests).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out).expanduser().resolve()
    dirs = dataset_dirs(out, plan.study)
    fingerprint = plan.fingerprint()
    if record_intervals is None:
        record_intervals = any(c.resolve().ci_every > 0 for c in plan.cells)
    if replicate is None:
        replicate = plan.replicate
    if replicate is None and any(c.base is not None for c in plan.cells):
        raise ValueError(f"study {plan.study!r} needs a replicate hook (build the plan with make_plan)")

    if fresh:
        for d in dirs.values():
            if d.is_dir():
                shutil.rmtree(d)
    existing = check_stored(plan, out)

    _cleanup(dirs)
    done = stored_keys(out, plan.study)
    wanted = list(plan.keys())
    todo = [k for k in wanted if k not in done]
    stored_before = len(wanted) - len(todo)
    if len(done) > len(wanted) - len(todo):
        log(f"[{plan.study}] note: {len(done) - stored_before} stored replications lie outside "
            f"this run's reps={plan.reps}; they stay in the dataset")

    conn = connect(address, num_cpus, log=log) if todo else None  # fails before anything is written
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    manifest = existing or {
        "study": plan.study,
        "fingerprint": fingerprint,
        "description": STUDIES[plan.study].description,
        "schema": {"trajectory": TRAJECTORY_SCHEMA.names, "intervals": INTERVAL_SCHEMA.names,
                   "failures": FAILURE_SCHEMA.names},
        "runs": [],
    }
    manifest.update({"root_seed": plan.root_seed, "reps": plan.reps,
                     "settings": sorted({c.setting for c in plan.cells}),
                     "methods": list(dict.fromkeys(c.method for c in plan.cells)),
                     "M": {s: sorted({c.M for c in plan.cells if c.setting == s})
                           for s in sorted({c.setting for c in plan.cells})},
                     "overrides": dict(plan.overrides), "record_intervals": bool(record_intervals),
                     "package_version": fingerprint["package_version"], "git_commit": _git_commit()})
    run_info = {"run_id": run_id, "started": _now(), "requested": len(wanted),
                "stored_before": stored_before, "status": "running", "argv": sys.argv}
    manifest["runs"].append(run_info)
    manifest["status"] = "running"
    _atomic_write_json(manifest, manifest_path(out, plan.study))

    start = time.perf_counter()
    failures, computed, interrupted, keyboard = [], 0, False, False
    if todo:
        try:
            import ray

            n_cpus = max(1, int(conn.resources.get("CPU", num_cpus or os.cpu_count() or 1)))
            bsize = batch_size or choose_batch_size(len(todo), n_cpus)
            limit = max_in_flight or 2 * n_cpus + 2
            run_info.update({"ray_mode": conn.mode, "ray_resources": conn.resources,
                             "batch_size": bsize, "max_in_flight": limit})
            cells = {(c.setting, c.method, c.M): c for c in plan.cells}
            batches = []
            for ckey in cells:  # group by cell, in plan order, then chunk
                reps = [k[3] for k in todo if k[:3] == ckey]
                for i in range(0, len(reps), bsize):
                    chunk = reps[i:i + bsize]
                    batches.append((cells[ckey], [(r, replication_seed(plan.root_seed, plan.study,
                                                                         ckey[0], r)) for r in chunk]))
            log(f"[{plan.study}] {len(todo)} replications to compute ({stored_before} stored) in "
                f"{len(batches)} tasks of <= {bsize} on {n_cpus} CPUs ({conn.mode} Ray)")
            computed, failures, interrupted, keyboard, nodes, task_cpu = _drive(
                ray, plan, batches, dirs, run_id, replicate, record_intervals, limit, progress,
                flush_rows, flush_seconds, stop_after_batches, log)
            run_info["nodes_used"] = nodes
            run_info["task_cpu_seconds"] = round(task_cpu, 3)
        finally:
            if conn.started_here:
                import ray
                ray.shutdown()
    seconds = time.perf_counter() - start
    run_info.update({"finished": _now(), "wall_seconds": round(seconds, 3), "computed": computed,
                     "failed": len(failures),
                     "status": "interrupted" if interrupted else ("failed" if failures else "complete")})
    missing = len(todo) - computed
    manifest["status"] = "complete" if missing == 0 else "incomplete"
    manifest["wall_seconds_total"] = round(sum(r.get("wall_seconds", 0) for r in manifest["runs"]), 3)
    _atomic_write_json(manifest, manifest_path(out, plan.study))
    if keyboard:
        raise KeyboardInterrupt
    return StudyReport(plan.study, str(out), len(wanted), stored_before, computed, len(failures),
                       seconds, interrupted, failures)


def _drive(ray, plan, batches, dirs, run_id, replicate, record_intervals, limit, progress,
           flush_rows, flush_seconds, stop_after_batches, log):
    remote = _remote_run_batch()
    writer = _Writer(dirs, run_id)
    total = sum(len(b[1]) for b in batches)
    bar = _Progress(plan.study, total, progress, log)
    replicate_ref = ray.put(replicate) if replicate is not None else None
    pending = list(reversed(batches))
    in_flight = {}
    computed, failures, stored_batches, interrupted, keyboard = 0, [], 0, False, False
    nodes = set()
    task_cpu = 0.0
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                cell, reps_seeds = pending.pop()
                ref = remote.remote(plan.study, cell, reps_seeds, replicate_ref, record_intervals, run_id)
                in_flight[ref] = (cell, reps_seeds)
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=10.0)
            if not ready:
                bar.update(0, 0)  # heartbeat line when nothing finishes for a while
            for ref in ready:
                cell, reps_seeds = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 -- worker died beyond retries, etc.
                    result = {"trajectory": TRAJECTORY_SCHEMA.empty_table(),
                              "intervals": INTERVAL_SCHEMA.empty_table(),
                              "failures": [_failure(plan.study, cell, r, s, f"{type(exc).__name__}: {exc}",
                                                    "".join(traceback.format_exception(exc)), run_id)
                                           for r, s in reps_seeds]}
                writer.add(result)
                nodes.add(result.get("node"))
                task_cpu += result.get("cpu_seconds", 0.0)
                failures.extend(result["failures"])
                computed += len(reps_seeds) - len(result["failures"])
                bar.update(len(reps_seeds), len(result["failures"]))
                stored_batches += 1
            if writer.due(flush_rows, flush_seconds):
                writer.flush()
            if stop_after_batches is not None and stored_batches >= stop_after_batches:
                interrupted = True
                break
    except KeyboardInterrupt:
        interrupted = keyboard = True
        log(f"[{plan.study}] interrupted: saving finished replications; rerun the same command to resume")
    finally:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        writer.flush()
        bar.close()
    nodes.discard(None)
    return computed, failures, interrupted, keyboard, sorted(nodes), task_cpu


class _Progress:
    """tqdm bar on a terminal; otherwise a line every ~10% or 60 s."""

    def __init__(self, study, total, enabled, log):
        self.study, self.total, self.enabled, self.log = study, total, enabled, log
        self.done = self.failed = 0
        self.start = time.monotonic()
        self.last_line = self.start
        self.next_mark = 0.1
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=study, unit="rep", dynamic_ncols=True)

    def update(self, n, failed):
        self.done += n
        self.failed += failed
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(failed=self.failed, refresh=False)
            return
        now = time.monotonic()
        frac = self.done / max(1, self.total)
        if ((frac >= self.next_mark and now - self.last_line >= 5) or now - self.last_line >= 60
                or self.done == self.total):
            elapsed = now - self.start
            eta = elapsed / frac - elapsed if frac > 0 else float("nan")
            self.log(f"[{self.study}] {self.done}/{self.total} done, {self.failed} failed, "
                     f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s")
            self.last_line = now
            while self.next_mark <= frac:
                self.next_mark += 0.1

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _describe_difference(old, new) -> str:
    if not isinstance(old, dict):
        return "no readable fingerprint"
    diffs = []
    if old.get("core_source_sha256") != new.get("core_source_sha256"):
        diffs.append("the bandit core's source code changed since these results were stored")
    for key in ("study", "root_seed", "package_version"):
        if old.get(key) != new.get(key):
            diffs.append(f"{key}: stored {old.get(key)!r}, requested {new.get(key)!r}")
    if old.get("replay") != new.get("replay"):
        a, b = old.get("replay") or {}, new.get("replay") or {}
        changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        diffs.append(f"the replay's data, code or options changed ({', '.join(changed)})")
    if old.get("cells") != new.get("cells"):
        o = {(c["setting"], c["method"], c["M"]): c for c in old.get("cells", [])}
        n = {(c["setting"], c["method"], c["M"]): c for c in new.get("cells", [])}
        if set(o) != set(n):
            diffs.append(f"cells: stored {sorted(o)}, requested {sorted(n)}")
        else:
            for k in n:
                a, b = o[k]["resolved_setting"], n[k]["resolved_setting"]
                changed = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
                if changed:
                    diffs.append(f"setting {k[0]} fields {changed} differ "
                                 f"(stored {[a.get(f) for f in changed]}, requested {[b.get(f) for f in changed]})")
                    break
    return "; ".join(diffs) or "fingerprint differs"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _git_commit():
    try:
        root = Path(__file__).resolve().parent.parent
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if res.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return res.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None
