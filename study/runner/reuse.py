"""Reuse of identical cells: a replication already stored (and verified) by another study of the
same seed namespace in the same ``out``, for a cell whose numbers would be identical, is copied
instead of recomputed (the ``study`` column rewritten).

Only replications computed in clean processes are copied: the run that stored them (named by its
commit record) must have recorded ``user_code`` in its manifest entry, without the cell among its
``tainted_cells`` (a built-in cell computed in a worker process that had imported a user policy's
module).  Runs stored before runs recorded it are not trusted:
their cells are recomputed."""
from __future__ import annotations

import json

import pyarrow as pa

from ..results import records, storage
from ..results.storage import StorageError, dataset_dirs, read_manifest
from ..policies import ALL_METHODS
from .catalogue import STUDIES, seed_namespace


def cell_identity(fingerprint: dict, cell: dict, record_intervals) -> str | None:
    """Everything that determines a cell's numbers, as text (two cells with the same identity give
    the same replications, value for value, apart from the ``study`` column): the fingerprint's
    seeds, versions and core source, and for a user policy its whole provenance record (source
    files, state).  None for a user policy recorded without a source hash: never reused."""
    keep = ("root_seed", "seed_namespace", "storage_format", "package_version", "core_source_sha256", "replay")
    policy = (fingerprint.get("policies") or {}).get(cell["method"])
    if cell["method"] not in ALL_METHODS and (policy is None or not policy.get("source_sha256")):
        return None
    return json.dumps({**{k: fingerprint.get(k) for k in keep}, "method": cell["method"], "policy": policy,
                       "resolved_setting": cell["resolved_setting"], "intervals": bool(record_intervals)},
                      sort_keys=True, default=str)


def reusable(plan, out, todo_cells, record_intervals) -> dict:
    """Stored replications of other studies under ``out`` that are identical to cells of ``plan``:
    ``{(setting, method, M): (source study, committed state)}`` for the cells in ``todo_cells``."""
    mine = plan.fingerprint()
    wanted = {cell_identity(mine, c, record_intervals): (c["setting"], c["method"], c["M"])
              for c in mine["cells"] if (c["setting"], c["method"], c["M"]) in todo_cells}
    wanted.pop(None, None)
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
            ident = cell_identity(theirs, c, manifest.get("record_intervals"))
            if ident is not None and ident in wanted and wanted[ident] not in found:
                try:
                    state = storage.committed(out, other)  # verified; a damaged source is not reused
                except StorageError:
                    break
                clean = clean_state(state, manifest, wanted[ident])
                if clean["keys"]:
                    found[wanted[ident]] = (other, clean)
    return found


def clean_run(run: dict | None, cell) -> bool:
    """Was ``cell`` (setting, method, M) computed (or copied) by ``run`` in processes that imported
    no user code (the run's ``user_code`` record; a run without one was stored before it existed)?"""
    record = (run or {}).get("user_code")
    return isinstance(record, dict) and list(cell) not in (record.get("tainted_cells") or [])


def clean_state(state: dict, manifest: dict, cell) -> dict:
    """``state`` (:func:`study.results.storage.committed`) keeping only the keys of ``cell`` stored by
    runs that computed it in clean processes (:func:`clean_run`)."""
    runs = {run.get("run_id"): run for run in manifest.get("runs", []) if isinstance(run, dict)}
    by_part = {}
    for part, keys in state["by_part"].items():
        mine = [k for k in keys if k[:3] == tuple(cell)]
        if mine and clean_run(runs.get(state["run_of"].get(part)), cell):
            by_part[part] = mine
    return {**state, "by_part": by_part, "keys": {k for keys in by_part.values() for k in keys}}


def count_reusable(plan, sources: dict, done: set) -> int:
    """How many of the plan's missing keys the ``sources`` of :func:`reusable` hold."""
    return len({k for _, state in sources.values() for k in state["keys"]
                if k[:3] in sources and k[3] < plan.reps and k not in done})


def copy_reused(plan, out, done: set, sources: dict, run_id, record_intervals, log) -> dict:
    """Copy the stored rows of the plan's keys not in ``done`` found in ``sources`` (:func:`reusable`)
    into ``plan``'s study, the ``study`` column rewritten (``done`` is updated); returns {source
    study: replications copied}."""
    copied, seq = {}, 0
    by_source: dict = {}
    for ckey, (other, state) in sources.items():
        by_source.setdefault(other, []).append((ckey, state))
    for other, cells in by_source.items():
        state = cells[0][1]  # the same verified state for every cell, each filtered to its clean parts
        by_part: dict = {}
        for _, cell_state in cells:
            for part, keys in cell_state["by_part"].items():
                by_part.setdefault(part, []).extend(keys)
        for part, keys in by_part.items():
            take = {k for k in keys if k[3] < plan.reps and k not in done}
            if not take:
                continue
            tables = _rows_of(out, other, part, state, take, record_intervals, plan.study)
            storage.commit_batch(out, plan.study, f"part-{run_id}-reuse{seq:05d}.parquet", tables, [], run_id,
                                 reused_from={"study": other, "part": part.name},
                                 **_numerics_of(out, other, part, len(take)))
            seq += 1
            done |= take
            copied[other] = copied.get(other, 0) + len(take)
    for other, n in copied.items():
        log(f"[{plan.study}] reused {n} replications stored by the identical cells of study {other!r}")
    return copied


def _numerics_of(out, other, part, n) -> dict:
    """The ``numerics`` entry of the commit record of ``n`` rows copied from ``part`` of study
    ``other``: the source record's (all ``n`` under its key when it has one), {} if it has none."""
    record, _ = records.read_record(storage.commits_dir(out, other) / (part.stem + ".json"))
    source = (record or {}).get("numerics")
    if not isinstance(source, dict) or not source:
        return {}
    return {"numerics": {next(iter(source)): n} if len(source) == 1 else dict(source)}


def _rows_of(out, other, part, state, take, record_intervals, study) -> dict:
    """The trajectory (and interval and cost) rows of keys ``take`` in one part of study ``other``,
    relabelled as rows of ``study``."""
    tables = {"trajectory": storage.read_keys([part], take)}
    ints = dataset_dirs(out, other)["intervals"] / part.name
    if record_intervals and ints in state["intervals"]:
        tables["intervals"] = storage.read_keys([ints], take)
    costs = dataset_dirs(out, other)["costs"] / part.name
    if costs in state.get("costs", ()):  # the cost of computing them (in the study that did)
        tables["costs"] = storage.read_keys([costs], take)
    for what, table in tables.items():
        idx = table.schema.get_field_index("study")
        tables[what] = table.set_column(idx, "study", pa.array([study] * table.num_rows, pa.string()))
    return tables
