"""The Ray study engine: fan replications out as remote tasks, gather them into Parquet, resume.

A *study* (``regret``, ``coverage``, ``msweep``) is a grid of *cells* -- (setting, method, M) with
the setting's overrides -- times ``reps`` replications.  The *replay* studies ``llm``, ``arena`` and
``byo`` (the LLM-ranking application, :mod:`study.llm`) have one setting each, built from data by
their ``source`` (:func:`study.llm.runs.replay_source`), which also supplies the ``replicate`` hook
(shipped to the workers with the tasks) and the provenance (hashes of the replay's code and data)
that joins the fingerprint.  Every replication has a key
``(setting, method, M, rep)`` and a seed that depends only on the root seed, the study's seed
namespace (:func:`seed_namespace`: one for the paper's simulation studies, its own for each
replay), the base setting name and ``rep`` (:func:`replication_seed`), so the numbers never depend on the worker
count, the batch size or the order in which tasks finish, and all methods (and, in the M-sweep, all
values of M) of replication ``rep`` share one environment (common random numbers).

Storage (Parquet parts, commit records with checksums, the manifest, the study lock, ``load``) is
:mod:`study.storage`, which knows nothing of Ray; ``docs/storage.md`` states its guarantees.  The
Ray connection is :mod:`study.rayconn` (``docs/cluster.md``).  This module keeps the plans, the
seeds, the worker-side batch, the reuse of identical cells and the driver loop.

Schema (one row per replication and step ``t = 1..T``) -- trajectories::

    study str, setting str, method str, M int32, T0 int32, T int32, rep int32, seed int64,
    t int32, major int32, other int32, explored bool, regret float64, avg_regret float64,
    rel_error float64, pair_regret float64, avg_pair_regret float64

``setting`` is the base setting name ("A", "B"); overrides given with ``--set`` are recorded in the
manifest.  ``major``/``other`` are the compared items (0-based), ``explored`` marks an exploration
step, ``regret`` the per-step regret, ``avg_regret`` R(t) = (1/t) sum_{s<=t} regret_s,
``rel_error`` max_i ||theta*_i - theta_i(t)|| / max_i ||theta*_i||, ``pair_regret`` the regret of
the compared pair ((x'theta*_best - x'theta*_i) + (x'theta*_best - x'theta*_j)) / 2 and
``avg_pair_regret`` its running average.  Intervals (one row per grid time, item and dimension
from the first grid time the debiased CI exists)::

    study str, setting str, method str, M int32, rep int32, seed int64, t int32, item int32,
    dim int32, estimate float64, se float64, lower float64, upper float64, truth float64,
    covered bool

Failures: ``study, setting, method, M, rep, seed, error, traceback, run_id``.  A replication is
reproduced exactly by ``study.run_replication(setting, method, seed=row.seed, M=row.M, **overrides)``
with the overrides from the manifest.

Resume: a rerun computes only the keys missing from the trajectory dataset (failed replications
are therefore retried).  If the stored manifest's fingerprint (resolved settings, methods, root
seed, package version, core source, storage format) differs from the requested one the engine
refuses (``ConfigMismatch``) unless ``fresh=True``, which deletes this study's three datasets first.
Identical cells are computed once: the paper's simulation studies share one seed namespace, and a
replication already stored (and verified) by another study in the same ``out`` for an identical
cell is copied, not recomputed (:func:`reusable`).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import storage
from .rayconn import (_CONNECTED, PROBE_SECONDS, RayConnection, _job_id, _loopback_only,  # noqa: F401
                      _resources, connect, max_local_cpus, probe_address)
from .settings import ALL_METHODS, METHODS, SETTINGS, check_method, resolve_setting
from .storage import (FAILURE_SCHEMA, INTERVAL_SCHEMA, KEY_COLUMNS, TRAJECTORY_SCHEMA, StorageError,  # noqa: F401
                      StudyLocked, dataset_dirs, load, manifest_path, read_manifest, stored_keys)

_parts = storage.parts  # used by study.figures, study.summary and study.cli

DEFAULT_SEED = 20250101
STUDY_NAMES = ("regret", "coverage", "msweep")  # the paper's simulation studies (jobs/paper.py)
REPLAY_STUDIES = ("llm", "arena", "byo")  # the LLM-ranking application (jobs/llm_ranking.py)
# The simulation studies share their replications' seeds; the namespace is the regret study's, so
# that its replications (and so every earlier reference of it) stay what they were.
PAPER_SEED_NAMESPACE = "regret"
MAX_REPS = 1_000_000  # per cell: 10^6 replications of T = 500 steps are ~5e8 stored rows already


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
    "baselines": StudyDefaults(
        settings=("A", "B"), methods=ALL_METHODS, reps=200, overrides={"ci_every": 0},
        description="The paper's five methods against four contextual dueling-bandit baselines (TS, MaxInP, "
                    "CoLSTIM, RB-UA), Settings A and B (docs/baselines.md)."),
    "llm_baselines": StudyDefaults(
        settings=("llm",), methods=ALL_METHODS, reps=50, overrides={"ci_every": 0},
        source="study.llm.runs:replay_source",
        description="The nine methods on the LLM-ranking replay (GENERATED judgments; docs/baselines.md)."),
}
BASELINE_STUDIES = ("baselines", "llm_baselines")  # jobs/baselines.py
# Studies that replay another study's environments: their replications' seeds (and so identical
# cells, which the engine then copies instead of recomputing) are that study's.
_SHARED_NAMESPACES = {"baselines": "regret", "llm_baselines": "llm"}

class ConfigMismatch(RuntimeError):
    """Stored results were produced by a different configuration."""


# --------------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------------

def stable_int(text: str) -> int:
    """A deterministic 32-bit integer for a string (first 4 bytes of its SHA-256), never hash()."""
    return int.from_bytes(hashlib.sha256(str(text).encode("utf-8")).digest()[:4], "big")


def seed_namespace(study: str) -> str:
    """The seed namespace of ``study``: ``"regret"`` for the simulation studies (so replication r of
    setting A is the same environment in regret, coverage and the M-sweep, and identical cells are
    computed once), the study's own name for a replay."""
    if study in STUDY_NAMES:
        return PAPER_SEED_NAMESPACE
    return _SHARED_NAMESPACES.get(study, study)


def replication_seed(root_seed: int, namespace: str, setting: str, rep: int) -> int:
    """The seed of replication ``rep`` of base setting ``setting`` in seed namespace ``namespace``
    (:func:`seed_namespace` of the study).

    Independent of method and M: every method (and every M of the sweep) sees the same
    environment in replication ``rep``.
    """
    ss = np.random.SeedSequence(int(root_seed), spawn_key=(stable_int(namespace), stable_int(setting), int(rep)))
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
    # policies registered in this process (study.register_policy): shipped to the workers by value
    factories: tuple = field(default=(), compare=False, repr=False)

    @property
    def n_replications(self) -> int:
        return len(self.cells) * self.reps

    def keys(self):
        """Every key, lazily (never a list: ``reps`` may be large)."""
        for cell in self.cells:
            for rep in range(self.reps):
                yield (cell.setting, cell.method, cell.M, rep)

    def count_stored(self, done) -> int:
        """How many of this plan's keys are in the set ``done`` (without enumerating the plan)."""
        cells = {(c.setting, c.method, c.M) for c in self.cells}
        return sum(1 for k in done if k[:3] in cells and 0 <= k[3] < self.reps)

    @property
    def namespace(self) -> str:
        return seed_namespace(self.study)

    def seed(self, setting: str, rep: int) -> int:
        return replication_seed(self.root_seed, self.namespace, setting, rep)

    def fingerprint(self) -> dict:
        """Everything that affects the numbers (not ``reps``: more reps only add keys)."""
        from . import __version__
        fingerprint = {
            "study": self.study,
            "root_seed": int(self.root_seed),
            "seed_namespace": self.namespace,
            "storage_format": storage.STORAGE_FORMAT,
            "package_version": __version__,
            "core_source_sha256": core_source_hash(),
            "cells": [{"setting": c.setting, "method": c.method, "M": c.M,
                       "resolved_setting": _setting_record(c)} for c in self.cells],
        }
        policies = _policy_records(self.cells)
        if policies:  # user policies: their import path and source hash (built-ins are in the core hash)
            fingerprint["policies"] = policies
        if self.provenance:
            fingerprint["replay"] = _jsonable(dict(self.provenance))
        return fingerprint


def _policy_records(cells) -> dict:
    from .policies import policy_provenance
    records = {}
    for cell in cells:
        if cell.method not in records and cell.method not in ALL_METHODS:
            record = policy_provenance(cell.method)
            records[cell.method] = {k: record.get(k) for k in ("kind", "import_path", "source_sha256")}
    return records


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
_NON_CORE = {"__init__.py", "engine.py", "storage.py", "rayconn.py", "cli.py", "figures.py", "summary.py", "bench_parallel.py",
             "bench.py"}


def core_source_hash() -> str:
    """SHA-256 over the source of the modules that compute a replication (study/*.py except the
    engine, its front ends and benchmarks, and the built-in policies in study/policies/), so that
    results of edited core code are never mixed with stored ones even when the package version did
    not change.  (study/legacy/, the frozen previous core, computes no stored result.)"""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    paths = [p for p in sorted(root.glob("*.py")) if p.name not in _NON_CORE] + sorted((root / "policies").glob("*.py"))
    for path in paths:
        h.update(str(path.relative_to(root)).encode())
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
    if reps > MAX_REPS:
        raise ValueError(f"reps must be at most {MAX_REPS:,} per cell, got {reps:,} (the stored table would "
                         "not fit on any disk)")
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
    from .policies import registered_policies
    registered = registered_policies()
    factories = tuple((m, registered[m]) for m in methods if m in registered and m not in ALL_METHODS)
    return Plan(study=study, root_seed=int(seed), reps=int(reps), cells=tuple(cells),
                overrides=tuple(sorted(user.items())), provenance=tuple(sorted(provenance.items())),
                replicate=hook, factories=factories)


# --------------------------------------------------------------------------------------------
# Worker side: one batch = several replications of one cell
# --------------------------------------------------------------------------------------------

_SETTING_CACHE: dict = {}


class _WithFactories:
    """A replication function that builds registered policies from the factories shipped with the
    task (the registry of :func:`study.register_policy` lives in the driver's process only)."""

    def __init__(self, factories: dict, base=None):
        self.factories, self.base = factories, base

    def __call__(self, setting, method, seed):
        extra = {"policy": self.factories[method]} if method in self.factories else {}
        if self.base is not None:
            return self.base(setting, method, seed, **extra)
        from . import run_replication
        return run_replication(setting, method, seed, **extra)


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


def _shared_replicate(setting, methods, seed) -> dict:
    """{method: result} of several methods on one environment, their shared prefix computed once
    (:func:`study.replication.run_environment_methods`); equal to separate runs value for value."""
    from .environment import BTLEnvironment
    from .replication import run_environment_methods
    return run_environment_methods(BTLEnvironment(setting, seed), methods, setting, seed=int(seed))


def run_batch(study: str, cell, reps_seeds, replicate=None, record_intervals=True,
              run_id: str = "") -> dict:
    """Run replications ``reps_seeds = [(rep, seed), ...]`` of one cell, in this process; ``cell``
    may also be a tuple of cells that differ only by method and share a prefix of their steps
    (:func:`_cell_groups`), all run on each replication's one environment.

    An exception in one replication is caught and returned as a failure record; the others still
    run.  Returns ``{"trajectory": Table, "intervals": Table, "failures": [dict], "seconds": s}``.
    """
    start = time.perf_counter()
    cpu_start = time.process_time()
    cells = _as_cells(cell)
    first = cells[0]
    if first.base is not None:  # a replay's setting: built from data, not cached by name
        setting = first.resolve()
    else:
        key = first.overrides + (("__name", first.setting),)
        setting = _SETTING_CACHE.get(key)
        if setting is None:
            setting = _SETTING_CACHE[key] = first.resolve()
    trajs, ints, failures = [], [], []
    for rep, seed in reps_seeds:
        try:
            if len(cells) > 1:
                results = _shared_replicate(setting, [c.method for c in cells], seed)
            else:
                results = {first.method: (replicate or _default_replicate)(setting, first.method, seed)}
            tables = [(_trajectory_table(study, c, setting, rep, seed, results[c.method]),
                       _interval_table(study, c, rep, seed, results[c.method]) if record_intervals else None)
                      for c in cells]
        except Exception as exc:  # noqa: BLE001 -- recorded, the batch goes on
            failures.extend(_failure(study, c, rep, seed, f"{type(exc).__name__}: {exc}",
                                     traceback.format_exc(), run_id) for c in cells)
            continue
        for traj, interval in tables:
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
# Stored results: configuration check and reuse of identical cells
# --------------------------------------------------------------------------------------------

def check_stored(plan: Plan, out):
    """The stored manifest of ``plan.study`` under ``out`` (None if nothing is stored); raises
    ``ConfigMismatch`` if the stored results come from a different configuration and
    :class:`study.storage.StorageError` (naming the file) if the manifest cannot be read."""
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


def _cell_identity(fingerprint: dict, cell: dict, record_intervals) -> str:
    """Everything that determines a cell's numbers, as text (two cells with the same identity give
    the same replications, value for value, apart from the ``study`` column)."""
    keep = ("root_seed", "seed_namespace", "storage_format", "package_version", "core_source_sha256", "replay")
    return json.dumps({**{k: fingerprint.get(k) for k in keep}, "method": cell["method"],
                       "resolved_setting": cell["resolved_setting"], "intervals": bool(record_intervals)},
                      sort_keys=True, default=str)


def reusable(plan: Plan, out, todo_cells, record_intervals) -> dict:
    """Stored replications of other studies under ``out`` that are identical to cells of ``plan``:
    ``{(setting, method, M): (source study, committed state)}`` for the cells in ``todo_cells``."""
    mine = plan.fingerprint()
    wanted = {_cell_identity(mine, c, record_intervals): (c["setting"], c["method"], c["M"])
              for c in mine["cells"] if (c["setting"], c["method"], c["M"]) in todo_cells}
    found = {}
    for other in STUDIES:  # any study of the same seed namespace (checked below) may hold them
        if other == plan.study or not wanted or seed_namespace(other) != plan.namespace:
            continue
        try:
            manifest = read_manifest(out, other)
        except StorageError:
            continue
        if not manifest or manifest.get("fingerprint", {}).get("seed_namespace") != plan.namespace:
            continue
        theirs = manifest["fingerprint"]
        for c in theirs.get("cells", []):
            ident = _cell_identity(theirs, c, manifest.get("record_intervals"))
            if ident in wanted and wanted[ident] not in found:
                try:
                    state = storage.committed(out, other)  # verified; a damaged source is not reused
                except StorageError:
                    break
                found[wanted[ident]] = (other, state)
    return found


def _copy_reused(plan, out, done: set, sources: dict, run_id, record_intervals, log) -> dict:
    """Copy the stored rows of the plan's keys not in ``done`` found in ``sources`` (:func:`reusable`)
    into ``plan``'s study, the ``study`` column rewritten (``done`` is updated); returns {source
    study: replications copied}."""
    copied, seq = {}, 0
    by_source: dict = {}
    for ckey, (other, state) in sources.items():
        by_source.setdefault(other, []).append((ckey, state))
    for other, cells in by_source.items():
        state = cells[0][1]
        ckeys = {c for c, _ in cells}
        for part, keys in state["by_part"].items():
            take = {k for k in keys if k[:3] in ckeys and k[3] < plan.reps and k not in done}
            if not take:
                continue
            tables = {"trajectory": storage.read_keys([part], take)}
            ints = dataset_dirs(out, other)["intervals"] / part.name
            if record_intervals and ints in state["intervals"]:
                tables["intervals"] = storage.read_keys([ints], take)
            for what, table in tables.items():
                idx = table.schema.get_field_index("study")
                tables[what] = table.set_column(idx, "study", pa.array([plan.study] * table.num_rows, pa.string()))
            storage.commit_batch(out, plan.study, f"part-{run_id}-reuse{seq:05d}.parquet", tables, [], run_id,
                                 reused_from={"study": other, "part": part.name})
            seq += 1
            done |= take
            copied[other] = copied.get(other, 0) + len(take)
    for other, n in copied.items():
        log(f"[{plan.study}] reused {n} replications stored by the identical cells of study {other!r}")
    return copied


# --------------------------------------------------------------------------------------------
# Ray connection: study/rayconn.py
# --------------------------------------------------------------------------------------------

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
    reused: int = 0
    signal: str | None = None  # "SIGINT"/"SIGTERM" when a signal stopped the run

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.interrupted

    @property
    def exit_status(self) -> int:
        if self.signal:
            return 128 + int(getattr(signal, self.signal))
        return 0 if self.ok else 1

    def summary(self) -> str:
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
            text += f"\n  ... and {len(self.failures) - 10} more (see {self.study}_failures/)"
        return text


MAX_BATCH = 25            # replications per task at most
TARGET_TASK_SECONDS = 2.0  # once replication times are known, tasks are cut to about this long
FLUSH_SECONDS = 1.0       # finished replications are committed to disk at most this long after arrival
WAIT_SECONDS = 0.5        # the driver loop wakes at least this often (signals, flushes)


def choose_batch_size(n_todo: int, n_cpus: int) -> int:
    """About 8 tasks per CPU (load balance) but at most ``MAX_BATCH`` replications per task."""
    return max(1, min(MAX_BATCH, math.ceil(n_todo / max(1, 8 * n_cpus))))


class _BatchSize:
    """The size of the next task: fixed if given; otherwise at most the load-balancing size, small
    until replication times are known, then about ``TARGET_TASK_SECONDS`` of work (so an interrupt
    or a lost worker loses little).  Batching never changes results."""

    def __init__(self, fixed, base):
        self.fixed, self.base = fixed, base
        self.seconds = self.count = 0.0

    def observe(self, seconds, n):
        self.seconds += seconds
        self.count += n

    def __call__(self) -> int:
        if self.fixed:
            return self.fixed
        if not self.count:
            return min(self.base, 4)
        per_rep = self.seconds / self.count
        return max(1, min(self.base, int(TARGET_TASK_SECONDS / max(per_rep, 1e-6))))


def _as_cells(cell) -> tuple:
    return tuple(cell) if isinstance(cell, tuple) else (cell,)


def _cell_groups(plan: Plan, shared: bool):
    """The plan's cells in plan order, as tuples: cells of one (setting, M, overrides) whose methods
    are known to share a prefix of their steps (RB and ERA: :func:`study.replication.shared_prefix`)
    form one group when ``shared``; every other cell is a group of one."""
    if not shared:
        return [(c,) for c in plan.cells]
    from .policies import make_policy
    from .replication import shared_prefix
    groups, placed = [], set()
    for cell in plan.cells:
        if cell in placed:
            continue
        group = [cell]
        if cell.base is None:
            setting = cell.resolve()
            leader = make_policy(cell.method, setting)
            for other in plan.cells:
                if (other not in placed and other is not cell and other.base is None
                        and (other.setting, other.M, other.overrides) == (cell.setting, cell.M, cell.overrides)
                        and shared_prefix(leader, make_policy(other.method, setting)) > 0):
                    group.append(other)
        placed.update(group)
        groups.append(tuple(group))
    return groups


def _batches(plan: Plan, done: set, size, shared: bool = False):
    """(cells, [(rep, seed), ...]) for every key of ``plan`` not in ``done``, lazily, grouped by
    cell in plan order (memory independent of ``plan.reps``).  With ``shared`` (the default
    replication function), a replication missing for every cell of a group (:func:`_cell_groups`)
    is one work item that runs all of them; a replication missing for only some runs them alone."""
    for group in _cell_groups(plan, shared):
        singles = {c: [] for c in group}
        chunk = []
        for rep in range(plan.reps):
            missing = [c for c in group if (c.setting, c.method, c.M, rep) not in done]
            if not missing:
                continue
            item = (rep, plan.seed(group[0].setting, rep))
            if len(missing) == len(group):
                chunk.append(item)
                if len(chunk) * len(group) >= size():
                    yield (group if len(group) > 1 else group[0]), chunk
                    chunk = []
            else:
                for c in missing:
                    singles[c].append(item)
        if chunk:
            yield (group if len(group) > 1 else group[0]), chunk
        for c, items in singles.items():
            for k in range(0, len(items), max(1, size())):
                yield c, items[k:k + max(1, size())]


class _Interrupts:
    """SIGINT/SIGTERM while a study runs: the first asks the driver to stop (no new tasks, in-flight
    ones cancelled, finished ones written, manifest "interrupted"); later ones are reported and
    otherwise ignored, so the write always completes.  Installed from the main thread only."""

    def __init__(self, study, log, enabled=True):
        self.study, self.log, self.enabled = study, log, enabled
        self.signals, self.old = [], {}

    def _handle(self, signum, frame):
        self.signals.append(signal.Signals(signum).name)
        if len(self.signals) == 1:
            self.log(f"[{self.study}] {self.signals[0]}: stopping; writing the finished replications "
                     "(another Ctrl-C will not interrupt the write)")
        else:
            self.log(f"[{self.study}] {self.signals[-1]} again: still writing the finished replications; "
                     "stopping as soon as they are on disk")

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    def __enter__(self):
        if self.enabled and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False


def run_study(plan: Plan, out, *, address=None, num_cpus=None, fresh=False, replicate=None,
              record_intervals=None, batch_size=None, max_in_flight=None, progress=True,
              flush_rows=500_000, flush_seconds=FLUSH_SECONDS, stop_after_batches=None,
              reuse=True, handle_signals=True, init_timeout=None, log=None) -> StudyReport:
    """Run (or resume) ``plan``, writing Parquet under ``out``.  See the module docstring and
    :mod:`study.storage`.

    Holds the study directory's lock for the whole run (:class:`study.storage.StudyLocked` if
    another process holds it); verifies the stored parts first (:class:`study.storage.DamagedPart`,
    :class:`study.storage.DuplicateKeys`).  ``replicate(setting, method, seed) -> ReplicationResult``
    defaults to the plan's hook (replay studies) or ``study.run_replication`` (a different callable
    must be importable on the workers; it is pickled once and shipped to them through the object
    store, with any data it carries).  ``reuse`` copies identical cells stored by another study.
    ``stop_after_batches`` stops early after that many batches are received (simulates an
    interruption; used by the tests).  SIGINT/SIGTERM stop the run cleanly (``handle_signals``).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out = Path(out).expanduser().resolve()
    if record_intervals is None:
        record_intervals = any(c.resolve().ci_every > 0 for c in plan.cells)
    if replicate is None:
        replicate = plan.replicate
    if plan.factories:  # registered policies exist only in this process: ship them with the tasks
        replicate = _WithFactories(dict(plan.factories), replicate)
    if replicate is None and any(c.base is not None for c in plan.cells):
        raise ValueError(f"study {plan.study!r} needs a replicate hook (build the plan with make_plan)")
    run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    with storage.study_lock(out, run_id=run_id):
        return _run_locked(plan, out, run_id, address, num_cpus, fresh, replicate, record_intervals,
                           batch_size, max_in_flight, progress, flush_rows, flush_seconds,
                           stop_after_batches, reuse, handle_signals, init_timeout, log)


def _run_locked(plan, out, run_id, address, num_cpus, fresh, replicate, record_intervals, batch_size,
                max_in_flight, progress, flush_rows, flush_seconds, stop_after_batches, reuse,
                handle_signals, init_timeout, log) -> StudyReport:
    dirs = dataset_dirs(out, plan.study)
    fingerprint = plan.fingerprint()
    if fresh:
        for d in dirs.values():
            if d.is_dir():
                shutil.rmtree(d)
    existing = check_stored(plan, out)
    storage.cleanup(out, plan.study)
    done = set(storage.committed(out, plan.study)["keys"])  # verified: damaged parts raise here
    stored_before = plan.count_stored(done)
    if len(done) > stored_before:
        log(f"[{plan.study}] note: {len(done) - stored_before} stored replications lie outside "
            f"this run's reps={plan.reps}; they stay in the dataset")
    missing = plan.n_replications - stored_before
    sources = reusable(plan, out, {(c.setting, c.method, c.M) for c in plan.cells}, record_intervals) \
        if reuse and missing else {}
    n_reusable = len({k for _, state in sources.values() for k in state["keys"]
                      if k[:3] in sources and k[3] < plan.reps and k not in done})
    n_todo = missing - n_reusable
    conn = connect(address, num_cpus, log=log, init_timeout=init_timeout) if n_todo else None  # before any write
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    manifest = existing or {
        "study": plan.study,
        "fingerprint": fingerprint,
        "description": STUDIES[plan.study].description,
        "schema": {"trajectory": TRAJECTORY_SCHEMA.names, "intervals": INTERVAL_SCHEMA.names,
                   "failures": FAILURE_SCHEMA.names},
        "runs": [],
    }
    for old in manifest["runs"]:  # we hold the lock, so a run still marked running has died
        if old.get("status") == "running":
            old["status"] = "died"
    manifest.update({"root_seed": plan.root_seed, "reps": plan.reps,
                     "settings": sorted({c.setting for c in plan.cells}),
                     "methods": list(dict.fromkeys(c.method for c in plan.cells)),
                     "M": {s: sorted({c.M for c in plan.cells if c.setting == s})
                           for s in sorted({c.setting for c in plan.cells})},
                     "overrides": dict(plan.overrides), "record_intervals": bool(record_intervals),
                     "package_version": fingerprint["package_version"], "git_commit": _git_commit(),
                     "storage_format": storage.STORAGE_FORMAT})
    run_info = {"run_id": run_id, "started": _now(), "requested": plan.n_replications,
                "stored_before": stored_before, "status": "running", "argv": sys.argv,
                "host": socket.gethostname(), "pid": os.getpid()}
    manifest["runs"].append(run_info)
    manifest["status"] = "running"
    storage.write_manifest(manifest, out, plan.study)

    start = time.perf_counter()
    failures, computed, interrupted, finished = [], 0, False, False
    interrupts = _Interrupts(plan.study, log, enabled=handle_signals)
    with interrupts:
        try:
            reused = _copy_reused(plan, out, done, sources, run_id, record_intervals, log) if sources else {}
            run_info["reused"] = {"replications": sum(reused.values()), "from": reused}
            if n_todo and not interrupts.requested:
                import ray

                n_cpus = max(1, int(conn.resources.get("CPU", num_cpus or os.cpu_count() or 1)))
                size = _BatchSize(batch_size, choose_batch_size(n_todo, n_cpus))
                limit = max_in_flight or 2 * n_cpus + 2
                run_info.update({"ray_mode": conn.mode, "ray_resources": conn.resources,
                                 "batch_size": batch_size or f"adaptive <= {size.base}", "max_in_flight": limit})
                log(f"[{plan.study}] {n_todo} replications to compute ({stored_before} stored"
                    f"{f', {n_reusable} reused' if n_reusable else ''}) in tasks of <= {size.base} on "
                    f"{n_cpus} CPUs ({conn.mode} Ray)")
                computed, failures, interrupted, nodes, task_cpu = _drive(
                    ray, plan, out, _batches(plan, done, size, shared=replicate is None), size, n_todo, run_id, replicate,
                    record_intervals, limit, progress, flush_rows, flush_seconds, stop_after_batches,
                    interrupts, log)
                run_info["nodes_used"] = nodes
                run_info["task_cpu_seconds"] = round(task_cpu, 3)
            finished = True
        finally:
            if conn is not None and conn.started_here:
                import ray
                ray.shutdown()
            interrupted = interrupted or interrupts.requested
            seconds = time.perf_counter() - start
            n_reused = run_info.get("reused", {}).get("replications", 0)
            left = n_todo + n_reusable - n_reused - computed
            run_info.update({"finished": _now(), "wall_seconds": round(seconds, 3), "computed": computed,
                             "failed": len(failures),
                             "status": "interrupted" if interrupted else ("error" if not finished else
                                                                          "failed" if failures else "complete")})
            if interrupts.requested:
                run_info["signals"] = list(interrupts.signals)
            manifest["status"] = ("interrupted" if interrupted else "complete" if finished and left == 0
                                  else "incomplete")
            manifest["wall_seconds_total"] = round(sum(r.get("wall_seconds", 0) for r in manifest["runs"]), 3)
            storage.write_manifest(manifest, out, plan.study)
    return StudyReport(plan.study, str(out), plan.n_replications, stored_before, computed, len(failures),
                       seconds, interrupted, failures, reused=n_reused,
                       signal=interrupts.signals[0] if interrupts.signals else None)


def _drive(ray, plan, out, batches, size, total, run_id, replicate, record_intervals, limit, progress,
           flush_rows, flush_seconds, stop_after_batches, interrupts, log):
    remote = _remote_run_batch()
    writer = _Writer(out, plan.study, run_id)
    bar = _Progress(plan.study, total, progress, log)
    replicate_ref = ray.put(replicate) if replicate is not None else None
    in_flight = {}
    failures, received, stop = [], 0, False
    nodes, task_cpu = set(), 0.0
    exhausted = False
    last_news = time.monotonic()
    try:
        while not stop:
            while not exhausted and len(in_flight) < limit and not interrupts.requested:
                nxt = next(batches, None)
                if nxt is None:
                    exhausted = True
                    break
                cell, reps_seeds = nxt
                ref = remote.remote(plan.study, cell, reps_seeds, replicate_ref, record_intervals, run_id)
                in_flight[ref] = (cell, reps_seeds)
            if interrupts.requested or not in_flight:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                cell, reps_seeds = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 -- worker died beyond retries, etc.
                    result = {"trajectory": TRAJECTORY_SCHEMA.empty_table(),
                              "intervals": INTERVAL_SCHEMA.empty_table(),
                              "failures": [_failure(plan.study, c, r, s, f"{type(exc).__name__}: {exc}",
                                                    "".join(traceback.format_exception(exc)), run_id)
                                           for c in _as_cells(cell) for r, s in reps_seeds]}
                writer.add(result)
                nodes.add(result.get("node"))
                task_cpu += result.get("cpu_seconds", 0.0)
                if "seconds" in result:
                    size.observe(result["seconds"], len(reps_seeds) * len(_as_cells(cell)))
                failures.extend(result["failures"])
                bar.update(len(reps_seeds) * len(_as_cells(cell)), len(result["failures"]))
                received += 1
                last_news = time.monotonic()
            if writer.due(flush_rows, flush_seconds):
                writer.flush()
            if not ready and time.monotonic() - last_news >= 10:
                bar.update(0, 0)  # heartbeat line when nothing finishes for a while
                last_news = time.monotonic()
            if stop_after_batches is not None and received >= stop_after_batches:
                stop = True
    finally:
        for ref in in_flight:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 -- already finished or gone
                pass
        writer.flush()
        bar.close()
    nodes.discard(None)
    return writer.stored, failures, stop or interrupts.requested, sorted(nodes), task_cpu


class _Writer:
    """Buffers batch results in the driver and commits them (:func:`study.storage.commit_batch`)."""

    def __init__(self, out, study, run_id):
        self.out, self.study, self.run_id = out, study, run_id
        self.seq = 0
        self.stored = 0  # successful replications committed
        self._reset()

    def _reset(self):
        self.traj, self.ints, self.fails = [], [], []
        self.rows = 0
        self.last_flush = time.monotonic()

    def add(self, result: dict):
        if result["trajectory"].num_rows:
            self.traj.append(result["trajectory"])
        if result["intervals"].num_rows:
            self.ints.append(result["intervals"])
        self.fails.extend(result["failures"])
        self.rows += result["trajectory"].num_rows + result["intervals"].num_rows

    def due(self, max_rows, max_seconds) -> bool:
        pending = self.traj or self.ints or self.fails
        return bool(pending) and (self.rows >= max_rows or time.monotonic() - self.last_flush >= max_seconds)

    def flush(self):
        if not (self.traj or self.ints or self.fails):
            return
        tables = {"trajectory": pa.concat_tables(self.traj) if self.traj else TRAJECTORY_SCHEMA.empty_table(),
                  "intervals": pa.concat_tables(self.ints) if self.ints else INTERVAL_SCHEMA.empty_table(),
                  "failures": pa.Table.from_pylist(self.fails, schema=FAILURE_SCHEMA)}
        failed = [(f["setting"], f["method"], f["M"], f["rep"]) for f in self.fails]
        record = storage.commit_batch(self.out, self.study, f"part-{self.run_id}-{self.seq:05d}.parquet",
                                      tables, failed, self.run_id)
        self.seq += 1
        self.stored += len(record["keys"])
        self._reset()


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
    if old.get("storage_format") != new.get("storage_format"):
        diffs.append(f"stored with storage format {old.get('storage_format', 1)!r}, this version writes "
                     f"format {new.get('storage_format')!r} (checksummed parts, shared seeds)")
    for key in ("study", "root_seed", "seed_namespace", "package_version"):
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
