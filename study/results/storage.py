"""Study storage: commit records with checksums, verification, recovery and ``load``.

This package knows nothing of Ray; the guarantees of a study directory are read and tested here.
``docs/storage.md`` states them with what was measured.

Layout under ``out`` (one *study directory* per ``--out``)::

    out/_study.lock                               the writer's lock (holder: host, pid, run, argv)
    out/<study>/_manifest.json                    configuration, versions, runs (atomic JSON)
    out/<study>/part-<run>-<n>.parquet            trajectories
    out/<study>/_commits/part-<run>-<n>.json      commit record of batch <run>-<n> (see below)
    out/<study>_intervals/part-<run>-<n>.parquet  confidence intervals (when recorded)
    out/<study>_failures/part-<run>-<n>.parquet   failed replications
    out/<study>_costs/part-<run>-<n>.parquet      what each replication cost (one row per replication)

Atomic files and the manifest are :mod:`.files`, the writer lock :mod:`.lock`, the schemas
:mod:`.schema`; this module re-exports them, so ``storage`` is the one name callers need.

**Commit records.** A batch of replications is written as up to four parts (intervals, failures,
costs, trajectories) and then its commit record, written atomically *after* the parts: the SHA-256, byte
size and row count of each part and the keys ``(setting, method, M, rep)`` it holds.  Only parts
named by a commit record exist for :func:`load` and for resume; a part without one (a crash between
the part and its record) is deleted by the next writer.  Every read verifies each part against its
record (:class:`DamagedPart` names the file and the recovery command) and checks that no key is
stored twice (:class:`DuplicateKeys` names both files).

**Crafted files and planted links.** A record is untrusted input (:mod:`.records`): it may name only
its own batch's parts (a plain ``part-*.parquet`` name in a dataset directory of its study), and a
part must hold exactly the replications its record lists; anything else is damage, reported and
never followed, moved or deleted.  The lock file, the dataset directories, ``_commits/``,
``_damaged/`` and the manifest are never followed through links (:func:`.files.check_no_links`,
``O_NOFOLLOW``): a planted link is refused naming it, before anything is written or removed.

**Recovery.** ``python -m study.results verify OUT [STUDY ...]`` checks every part;
``python -m study.results drop-damaged OUT STUDY`` moves the damaged batches (each record with its
own batch's parts, also when the record itself is unreadable) to ``out/<study>/_damaged/``;
rerunning the study's command then recomputes exactly those replications.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import records
from .errors import DamagedPart, DuplicateKeys, PlantedLink, StorageError, StudyLocked, WriteFailed, recovery_hint
from .files import (COMMITS, DAMAGED, atomic_write_bytes, atomic_write_json, atomic_write_table, check_no_links,
                    commits_dir, dataset_dirs, make_dir, manifest_path, parts, read_manifest, write_manifest)
from .lock import LOCK_NAME, describe_holder, holds_lock, lock_path, study_lock
from .schema import COST_SCHEMA, FAILURE_SCHEMA, INTERVAL_SCHEMA, KEY_COLUMNS, SCHEMAS, STORAGE_FORMAT, TRAJECTORY_SCHEMA


def _commit_keys(table: pa.Table) -> list:
    if table.num_rows == 0:
        return []
    keys = table.select(list(KEY_COLUMNS)).group_by(list(KEY_COLUMNS)).aggregate([]).to_pydict()
    return sorted(zip(keys["setting"], keys["method"], keys["M"], keys["rep"]))


def commit_batch(out, study, name: str, tables: dict, failed: list, run_id: str, **extra) -> dict:
    """Write one batch: its parts (intervals, failures, costs, trajectories) and then its commit record.

    ``tables`` maps a dataset name to a ``pa.Table`` (empty ones are skipped); ``failed`` lists the
    keys of the failures table.  Returns the record.  Raises :class:`PlantedLink` if a directory of
    the study is a link and :class:`WriteFailed` (one line, naming the file) if a file cannot be
    written."""
    if not records.PART_NAME.fullmatch(name):
        raise ValueError(f"a batch is named part-<run>-<n>.parquet, got {name!r}")
    check_no_links(out, study)
    dirs = dataset_dirs(out, study)
    files = {}
    for what in ("intervals", "failures", "costs", "trajectory"):
        table = tables.get(what)
        if table is not None and table.num_rows:
            make_dir(dirs[what])
            files[what] = atomic_write_table(table, dirs[what] / name)
    keys = _commit_keys(tables["trajectory"]) if "trajectory" in files else []
    record = {"format": STORAGE_FORMAT, "name": name, "run_id": run_id,
              "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
              "files": files, "keys": [list(k) for k in keys],
              "failed_keys": [list(k) for k in sorted(set(map(tuple, failed)))], **extra}
    make_dir(commits_dir(out, study))
    atomic_write_json(record, commits_dir(out, study) / (Path(name).stem + ".json"))
    return record


def _record_paths(out, study) -> list:
    directory = commits_dir(out, study)
    if directory.is_symlink() or not directory.is_dir():
        return []
    return sorted(directory.glob("part-*.json"))


def read_commits(out, study) -> list:
    """[(record path, record)] of ``study``, in name order; an unreadable or malformed record is a
    :class:`DamagedPart` (naming it)."""
    check_no_links(out, study)
    result = []
    for path in _record_paths(out, study):
        record, problem = records.read_record(path)
        if problem:
            raise DamagedPart(f"{path}: {problem}; {recovery_hint(out, study)}")
        result.append((path, record))
    return result


def known_runs(out, study) -> set | None:
    """The run ids the manifest of ``study`` records (None when there is no manifest);
    :class:`StorageError` naming the file when it cannot be read."""
    manifest = read_manifest(out, study)
    if manifest is None:
        return None
    return {run.get("run_id") for run in manifest.get("runs", []) if isinstance(run, dict)}


def run_of_part(path: Path) -> str:
    """The run id in a part's name ``part-<run>-<n>.parquet`` (``part-<run>-reuse<n>.parquet``)."""
    return Path(path).stem[len("part-"):].rpartition("-")[0]


def _unknown_run(rid, runs) -> str:
    where = ("which the study's manifest does not record" if runs is not None else
             "and the study has no manifest to record it")
    return (f"names run {rid!r}, {where}: no run of this study wrote it (forged, or copied in from elsewhere; "
            "never counted)")


def verify(out, study) -> dict:
    """Check every committed part of ``study`` against its record, and every record and part
    against the runs of the study's manifest.

    Returns ``{"commits", "replications", "damaged": [(file, reason, record, n_keys)],
    "duplicates": [(key, file, file)], "uncommitted": [file], "foreign": [(file, reason)]}`` and
    never raises for damage: an unreadable record, a record naming anything but its own batch's
    parts (never followed) or a run the manifest does not record, a part that is missing, a link,
    of another size or checksum, or that holds other replications than its record lists.
    ``uncommitted``: parts without a record of a run the manifest records (a crash between a part
    and its record: removed by the next run); ``foreign``: parts without a record whose run the
    manifest does not record (planted: refused).  Raises :class:`PlantedLink` if a directory of the
    study is a link, :class:`StorageError` if its manifest cannot be read."""
    check_no_links(out, study)
    dirs = dataset_dirs(out, study)
    runs = known_runs(out, study)
    damaged, duplicates, seen, listed = [], [], {}, set()
    own_names = set()  # every part name a record (readable or not) accounts for
    n_keys = n_commits = 0
    for rpath in _record_paths(out, study):
        own_names.add(records.expected_name(rpath))
        record, problem = records.read_record(rpath)
        if problem:
            damaged.append((rpath, problem, rpath, 0))
            continue
        n = len(record.get("keys", []))
        found = len(damaged)
        for what, info in record["files"].items():
            problem = records.name_problem(rpath, what, info)
            if problem:
                damaged.append((rpath, problem, rpath, n))
                continue
            path = dirs[what] / info["file"]
            listed.add(path)
            reason = records.check_part(path, info, what, study, record)
            if reason:
                damaged.append((path, reason, rpath, n))
        if runs is None or record.get("run_id") not in runs:  # after the files: a crafted name is named first
            if len(damaged) == found:
                damaged.append((rpath, _unknown_run(record.get("run_id"), runs), rpath, n))
            continue
        n_commits += 1
        part = dirs["trajectory"] / records.expected_name(rpath)
        for key in record.get("keys", []):
            key = tuple(key)
            if key in seen:
                duplicates.append((key, seen[key], part))
            else:
                seen[key] = part
        n_keys += n
    loose = [p for d in dirs.values() for p in parts(d) if p not in listed and p.name not in own_names]
    uncommitted = [p for p in loose if runs is not None and run_of_part(p) in runs]
    foreign = [(p, f"a part no commit record names, of run {run_of_part(p)!r}, which "
                   + ("the study's manifest does not record" if runs is not None else "no manifest records")
                   + " (planted, or copied in from elsewhere; never counted)") for p in loose if p not in uncommitted]
    return {"commits": n_commits, "replications": n_keys, "damaged": damaged,
            "duplicates": duplicates, "uncommitted": uncommitted, "foreign": foreign}


def _raise_for(report: dict, out, study):
    if report["foreign"]:
        path, reason = report["foreign"][0]
        more = f" (and {len(report['foreign']) - 1} more)" if len(report["foreign"]) > 1 else ""
        raise DamagedPart(f"{path}: {reason}{more}; {recovery_hint(out, study)}")
    if report["damaged"]:
        path, reason, rpath, n = report["damaged"][0]
        more = f" (and {len(report['damaged']) - 1} more damaged files)" if len(report["damaged"]) > 1 else ""
        kind = "damaged commit record" if path == rpath else "damaged part"
        reps = f"{n} replication{'' if n == 1 else 's'}"
        raise DamagedPart(f"{path}: {kind}: {reason} ({reps}){more}; {recovery_hint(out, study)}")
    if report["duplicates"]:
        key, a, b = report["duplicates"][0]
        raise DuplicateKeys(f"replication {'/'.join(map(str, key))} is stored twice, in {a} and in {b} "
                            f"({len(report['duplicates'])} duplicated keys); the study directory was written "
                            "by two runs at once or files were copied into it: move one of the files away "
                            "(with its record in _commits/), or rerun with --fresh")


def committed(out, study) -> dict:
    """Verified committed parts: ``{"trajectory": [paths], "intervals": [...], "failures": [...],
    "costs": [...], "keys": set, "failed_keys": [keys in record order], "by_part": {trajectory path: keys},
    "run_of": {trajectory path: the run id its commit record names}}``.

    Raises :class:`DamagedPart` or :class:`DuplicateKeys` (naming the files)."""
    report = verify(out, study)
    _raise_for(report, out, study)
    dirs = dataset_dirs(out, study)
    result = {"trajectory": [], "intervals": [], "failures": [], "costs": [], "keys": set(), "failed_keys": [],
              "by_part": {}, "run_of": {}}
    for rpath, record in read_commits(out, study):
        for what in record["files"]:
            result[what].append(dirs[what] / records.expected_name(rpath))
        keys = [tuple(k) for k in record.get("keys", [])]
        result["keys"].update(keys)
        result["failed_keys"].extend(tuple(k) for k in record.get("failed_keys", []))
        if "trajectory" in record["files"]:
            part = dirs["trajectory"] / records.expected_name(rpath)
            result["by_part"][part] = keys
            result["run_of"][part] = record.get("run_id")
    return result


def stored_keys(out, study) -> set:
    """Keys ``(setting, method, M, rep)`` in the verified trajectory parts of ``study``."""
    return committed(out, study)["keys"]


def _remove_file(path: Path) -> None:
    """Unlink a file or a link (the link itself; its target is untouched); never a directory."""
    try:
        if not path.is_dir() or path.is_symlink():
            path.unlink(missing_ok=True)
    except OSError:
        pass


def cleanup(out, study):
    """Writer only (hold :func:`study_lock`): delete temporary files and parts without a commit
    record (a crash between a part and its record).  Parts of a batch whose record is unreadable
    are kept (``drop-damaged`` moves them aside); nothing is followed through a link."""
    assert holds_lock(out), "cleanup() needs the study lock"
    check_no_links(out, study)
    dirs = dataset_dirs(out, study)
    for d in list(dirs.values()) + [commits_dir(out, study)]:
        if d.is_dir():
            for tmp in d.glob("_tmp-*"):
                _remove_file(tmp)
    for path in verify(out, study)["uncommitted"]:
        _remove_file(path)


def drop_damaged(out, study, log=print) -> int:
    """Move every damaged batch (its record and the parts of its own batch) to
    ``out/<study>/_damaged/``; returns the number of replications to recompute.  Holds the study
    lock.  A path a record names outside its own batch is reported and never touched; the parts
    of a batch whose record is unreadable are moved with it, never deleted."""
    out = Path(out)
    dirs = dataset_dirs(out, study)
    with study_lock(out, run_id="drop-damaged"):
        report = verify(out, study)
        bad_records = {rec for _, _, rec, _ in report["damaged"]}
        dup_parts = {b for _, _, b in report["duplicates"]}
        bad_records.update(rpath for rpath in _record_paths(out, study)
                           if dirs["trajectory"] / records.expected_name(rpath) in dup_parts)
        target = dirs["trajectory"] / DAMAGED
        lost = 0
        for path, _ in report["foreign"]:
            make_dir(target)
            what = next(w for w, d in dirs.items() if path.parent == d)
            os.replace(path, target / f"{what}-{path.name}")
            log(f"moved {path} (a part no run of the study wrote) to {target}")
        for rpath in sorted(bad_records):
            make_dir(target)
            record, _ = records.read_record(rpath)
            for what, info in ((record or {}).get("files") or {}).items():
                if records.name_problem(rpath, what, info):
                    log(f"batch {rpath.stem}: not following {what} entry {info.get('file')!r} (not its own part)")
            name = records.expected_name(rpath)
            for what, directory in dirs.items():  # only the batch's own parts, by name
                src = directory / name
                if src.is_symlink() or src.exists():
                    os.replace(src, target / f"{what}-{name}")
            os.replace(rpath, target / rpath.name)
            n = len((record or {}).get("keys", []))
            lost += n
            what = f"{n} replications" if record is not None else "its record unreadable: replications unknown"
            log(f"moved batch {rpath.stem} ({what}) to {target}")
        cleanup(out, study)
    return lost


def load(out, study, what: str = "trajectory", columns=None, filter=None):
    """The stored table of ``study`` as a pandas DataFrame, sorted by its keys.

    Only committed, checksum-verified parts are read, and a key stored twice is an error.

    Parameters
    ----------
    out : path
        The results directory (``--out`` of the job; default ``outputs``).
    study : str
        The study's name (``"regret"``, ``"coverage"``, ``"msweep"``, ``"baselines"``, ``"llm"``, ...).
    what : {"trajectory", "intervals", "failures", "costs"}
        Which table: one row per replication and step; per grid time, item and dimension; per
        failed replication (the current failures only: a failure of a replication that has
        since succeeded is dropped, and only the most recent record per key is kept); or per
        replication, what it cost (CPU seconds by estimator regime, Newton and PCG counts: empty
        for studies stored before the table existed).
    columns : list of str, optional
        Columns to read (the key columns are always included).
    filter : pyarrow.dataset.Expression, optional
        Applied while reading, e.g. ``pc.field("t") == pc.field("T")`` for the final rows.

    Returns
    -------
    pandas.DataFrame
        Columns as in :mod:`study.results.schema`.

    Raises
    ------
    DamagedPart, DuplicateKeys
        A part does not match its checksum, or a key is stored twice (both name the files).

    Examples
    --------
    >>> import study                                    # doctest: +SKIP
    >>> df = study.load("outputs", "regret")             # doctest: +SKIP
    >>> df[df.t == df.T].groupby(["setting", "method"]).avg_regret.mean()  # doctest: +SKIP
    """
    import pyarrow.dataset as ds

    if what not in SCHEMAS:
        raise ValueError(f"what must be one of {list(SCHEMAS)}, got {what!r}")
    schema = SCHEMAS[what]
    state = committed(out, study)
    paths = state[what]
    if columns is not None:
        sort_cols = [c for c in KEY_COLUMNS + ("t", "item", "dim") if c in schema.names]
        columns = list(dict.fromkeys(list(columns) + sort_cols))
    if paths:
        try:
            table = ds.dataset([str(p) for p in paths], schema=schema, format="parquet").to_table(
                columns=columns, filter=filter)
        except (pa.ArrowInvalid, OSError) as exc:  # verified bytes that still do not parse
            raise DamagedPart(f"{dataset_dirs(out, study)[what]}: a part cannot be read ({exc}); "
                              f"{recovery_hint(out, study)}") from None
    else:
        table = schema.empty_table()
        if columns is not None:
            table = table.select(columns)
    df = table.to_pandas()
    if what == "failures":
        if len(df):
            done = state["keys"]
            mask = [k not in done for k in zip(df.setting, df.method, df.M, df.rep)]
            df = df[mask].drop_duplicates(list(KEY_COLUMNS), keep="last")
        return df.sort_values(list(KEY_COLUMNS)).reset_index(drop=True)
    sort = [c for c in list(KEY_COLUMNS) + ["t", "item", "dim"] if c in df.columns]
    return df.sort_values(sort, kind="stable").reset_index(drop=True)


def read_keys(paths, keys: set, columns=None) -> pa.Table:
    """Rows of the given parts whose key is in ``keys`` (used to reuse stored replications)."""
    tables = []
    for path in paths:
        table = pq.read_table(path, columns=columns)
        mask = [k in keys for k in zip(*(table.column(c).to_pylist() for c in KEY_COLUMNS))]
        tables.append(table.filter(pa.array(mask, type=pa.bool_())))
    return pa.concat_tables(tables) if tables else None


__all__ = ["COMMITS", "COST_SCHEMA", "DAMAGED", "FAILURE_SCHEMA", "INTERVAL_SCHEMA", "KEY_COLUMNS", "LOCK_NAME", "SCHEMAS",
           "STORAGE_FORMAT", "TRAJECTORY_SCHEMA", "DamagedPart", "DuplicateKeys", "PlantedLink", "StorageError",
           "StudyLocked", "WriteFailed", "atomic_write_bytes", "atomic_write_json", "atomic_write_table",
           "check_no_links", "cleanup", "commit_batch", "commits_dir",
           "committed", "dataset_dirs", "describe_holder", "drop_damaged", "holds_lock", "load", "lock_path",
           "manifest_path", "parts", "read_commits", "read_keys", "read_manifest", "recovery_hint", "stored_keys",
           "study_lock", "verify", "write_manifest"]
