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

Atomic files and the manifest are :mod:`.files`, the writer lock :mod:`.lock`, the schemas
:mod:`.schema`; this module re-exports them, so ``storage`` is the one name callers need.

**Commit records.** A batch of replications is written as up to three parts (intervals, failures,
trajectories) and then its commit record, written atomically *after* the parts: the SHA-256, byte
size and row count of each part and the keys ``(setting, method, M, rep)`` it holds.  Only parts
named by a commit record exist for :func:`load` and for resume; a part without one (a crash between
the part and its record) is deleted by the next writer.  Every read verifies each part against its
record (:class:`DamagedPart` names the file and the recovery command) and checks that no key is
stored twice (:class:`DuplicateKeys` names both files).

**Recovery.** ``python -m study.results verify OUT [STUDY ...]`` checks every part;
``python -m study.results drop-damaged OUT STUDY`` moves the damaged parts (and the other parts and
the record of the same batch) to ``out/<study>/_damaged/``; rerunning the study's command then
recomputes exactly those replications.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .._util import sha256_file
from .errors import DamagedPart, DuplicateKeys, StorageError, StudyLocked, recovery_hint
from .files import (COMMITS, DAMAGED, atomic_write_bytes, atomic_write_json, atomic_write_table, commits_dir,
                    dataset_dirs, manifest_path, parts, read_manifest, write_manifest)
from .lock import LOCK_NAME, describe_holder, holds_lock, lock_path, study_lock
from .schema import FAILURE_SCHEMA, INTERVAL_SCHEMA, KEY_COLUMNS, SCHEMAS, STORAGE_FORMAT, TRAJECTORY_SCHEMA


def _commit_keys(table: pa.Table) -> list:
    if table.num_rows == 0:
        return []
    keys = table.select(list(KEY_COLUMNS)).group_by(list(KEY_COLUMNS)).aggregate([]).to_pydict()
    return sorted(zip(keys["setting"], keys["method"], keys["M"], keys["rep"]))


def commit_batch(out, study, name: str, tables: dict, failed: list, run_id: str, **extra) -> dict:
    """Write one batch: its parts (intervals, failures, trajectories) and then its commit record.

    ``tables`` maps a dataset name to a ``pa.Table`` (empty ones are skipped); ``failed`` lists the
    keys of the failures table.  Returns the record."""
    dirs = dataset_dirs(out, study)
    files = {}
    for what in ("intervals", "failures", "trajectory"):
        table = tables.get(what)
        if table is not None and table.num_rows:
            dirs[what].mkdir(parents=True, exist_ok=True)
            files[what] = atomic_write_table(table, dirs[what] / name)
    keys = _commit_keys(tables["trajectory"]) if "trajectory" in files else []
    record = {"format": STORAGE_FORMAT, "name": name, "run_id": run_id,
              "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
              "files": files, "keys": [list(k) for k in keys],
              "failed_keys": [list(k) for k in sorted(set(map(tuple, failed)))], **extra}
    commits_dir(out, study).mkdir(parents=True, exist_ok=True)
    atomic_write_json(record, commits_dir(out, study) / (Path(name).stem + ".json"))
    return record


def read_commits(out, study) -> list:
    """[(record path, record)] of ``study``, in name order; an unreadable record is a
    :class:`DamagedPart`."""
    directory = commits_dir(out, study)
    if not directory.is_dir():
        return []
    result = []
    for path in sorted(directory.glob("part-*.json")):
        try:
            record = json.loads(path.read_text())
            if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
                raise ValueError("not a commit record")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise DamagedPart(f"{path}: unreadable commit record ({exc}); {recovery_hint(out, study)}") from None
        result.append((path, record))
    return result


_VERIFIED: dict = {}  # (path, size, mtime_ns, ctime_ns, inode) -> sha256, so one process hashes a file once


def _check_file(path: Path, info: dict):
    """None if ``path`` matches its record, else the reason."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "missing"
    if st.st_size != info.get("bytes"):
        return f"size {st.st_size} bytes, recorded {info.get('bytes')}"
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    digest = _VERIFIED.get(key)
    if digest is None:
        digest = sha256_file(path)
    if digest != info.get("sha256"):
        return "SHA-256 differs from the one recorded when it was written"
    _VERIFIED[key] = digest
    return None


def verify(out, study) -> dict:
    """Check every committed part of ``study`` against its record.

    Returns ``{"commits", "replications", "damaged": [(file, reason, record, n_keys)],
    "duplicates": [(key, file, file)], "uncommitted": [file]}`` and never raises for damage."""
    dirs = dataset_dirs(out, study)
    damaged, duplicates, seen, listed = [], [], {}, set()
    try:
        records = read_commits(out, study)
    except DamagedPart as exc:
        return {"commits": 0, "replications": 0, "damaged": [(None, str(exc), None, 0)], "duplicates": [],
                "uncommitted": []}
    n_keys = 0
    for rpath, record in records:
        for what, info in record["files"].items():
            if what not in dirs or not isinstance(info, dict):
                damaged.append((rpath, f"unknown dataset {what!r}", rpath, len(record.get("keys", []))))
                continue
            path = dirs[what] / str(info.get("file"))
            listed.add(path)
            reason = _check_file(path, info)
            if reason:
                damaged.append((path, reason, rpath, len(record.get("keys", []))))
        part = dirs["trajectory"] / str(record["files"].get("trajectory", {}).get("file"))
        for key in record.get("keys", []):
            key = tuple(key)
            if key in seen:
                duplicates.append((key, seen[key], part))
            else:
                seen[key] = part
        n_keys += len(record.get("keys", []))
    uncommitted = [p for d in dirs.values() for p in parts(d) if p not in listed]
    return {"commits": len(records), "replications": n_keys, "damaged": damaged,
            "duplicates": duplicates, "uncommitted": uncommitted}


def _raise_for(report: dict, out, study):
    if report["damaged"]:
        path, reason, _, n = report["damaged"][0]
        more = f" (and {len(report['damaged']) - 1} more damaged files)" if len(report["damaged"]) > 1 else ""
        if path is None:
            raise DamagedPart(reason)
        reps = f"{n} replication{'' if n == 1 else 's'}"
        raise DamagedPart(f"{path}: damaged part: {reason} ({reps}){more}; {recovery_hint(out, study)}")
    if report["duplicates"]:
        key, a, b = report["duplicates"][0]
        raise DuplicateKeys(f"replication {'/'.join(map(str, key))} is stored twice, in {a} and in {b} "
                            f"({len(report['duplicates'])} duplicated keys); the study directory was written "
                            "by two runs at once or files were copied into it: move one of the files away "
                            "(with its record in _commits/), or rerun with --fresh")


def committed(out, study) -> dict:
    """Verified committed parts: ``{"trajectory": [paths], "intervals": [...], "failures": [...],
    "keys": set, "failed_keys": [keys in record order], "by_part": {trajectory path: keys}}``.

    Raises :class:`DamagedPart` or :class:`DuplicateKeys` (naming the files)."""
    report = verify(out, study)
    _raise_for(report, out, study)
    dirs = dataset_dirs(out, study)
    result = {"trajectory": [], "intervals": [], "failures": [], "keys": set(), "failed_keys": [],
              "by_part": {}}
    for _, record in read_commits(out, study):
        for what, info in record["files"].items():
            result[what].append(dirs[what] / info["file"])
        keys = [tuple(k) for k in record.get("keys", [])]
        result["keys"].update(keys)
        result["failed_keys"].extend(tuple(k) for k in record.get("failed_keys", []))
        if "trajectory" in record["files"]:
            result["by_part"][dirs["trajectory"] / record["files"]["trajectory"]["file"]] = keys
    return result


def stored_keys(out, study) -> set:
    """Keys ``(setting, method, M, rep)`` in the verified trajectory parts of ``study``."""
    return committed(out, study)["keys"]


def cleanup(out, study):
    """Writer only (hold :func:`study_lock`): delete temporary files and parts without a commit
    record (a crash between a part and its record)."""
    assert holds_lock(out), "cleanup() needs the study lock"
    dirs = dataset_dirs(out, study)
    for d in list(dirs.values()) + [commits_dir(out, study)]:
        if d.is_dir():
            for tmp in d.glob("_tmp-*"):
                tmp.unlink(missing_ok=True)
    for path in verify(out, study)["uncommitted"]:
        path.unlink(missing_ok=True)


def drop_damaged(out, study, log=print) -> int:
    """Move every damaged batch (its parts and its record) to ``out/<study>/_damaged/``; returns
    the number of replications to recompute.  Holds the study lock."""
    out = Path(out)
    dirs = dataset_dirs(out, study)
    with study_lock(out, run_id="drop-damaged"):
        report = verify(out, study)
        bad_records = {rec for _, _, rec, _ in report["damaged"] if rec is not None}
        if any(rec is None for _, _, rec, _ in report["damaged"]):  # an unreadable record itself
            bad_records.update(p for p in commits_dir(out, study).glob("part-*.json") if not _readable(p))
        dup_parts = {b for _, _, b in report["duplicates"]}
        for rpath, record in _readable_commits(out, study):
            part = dirs["trajectory"] / str(record["files"].get("trajectory", {}).get("file"))
            if part in dup_parts:
                bad_records.add(rpath)
        target = dirs["trajectory"] / DAMAGED
        lost = 0
        for rpath in sorted(bad_records):
            target.mkdir(parents=True, exist_ok=True)
            record = _readable(rpath) or {}
            for what, info in (record.get("files") or {}).items():
                src = dirs.get(what, Path("/nonexistent")) / str(info.get("file"))
                if src.exists():
                    os.replace(src, target / f"{what}-{src.name}")
            os.replace(rpath, target / rpath.name)
            lost += len(record.get("keys", []))
            log(f"moved batch {rpath.stem} ({len(record.get('keys', []))} replications) to {target}")
        cleanup(out, study)
    return lost


def _readable(path):
    try:
        record = json.loads(Path(path).read_text())
        return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _readable_commits(out, study):
    for path in sorted(commits_dir(out, study).glob("part-*.json")) if commits_dir(out, study).is_dir() else []:
        record = _readable(path)
        if record is not None:
            yield path, record


def load(out, study, what: str = "trajectory", columns=None, filter=None):
    """The stored table of ``study`` as a pandas DataFrame, sorted by its keys.

    Only committed, checksum-verified parts are read, and a key stored twice is an error.

    Parameters
    ----------
    out : path
        The results directory (``--out`` of the job; default ``outputs``).
    study : str
        The study's name (``"regret"``, ``"coverage"``, ``"msweep"``, ``"baselines"``, ``"llm"``, ...).
    what : {"trajectory", "intervals", "failures"}
        Which table: one row per replication and step; per grid time, item and dimension; or
        per failed replication (the current failures only: a failure of a replication that has
        since succeeded is dropped, and only the most recent record per key is kept).
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


__all__ = ["COMMITS", "DAMAGED", "FAILURE_SCHEMA", "INTERVAL_SCHEMA", "KEY_COLUMNS", "LOCK_NAME", "SCHEMAS",
           "STORAGE_FORMAT", "TRAJECTORY_SCHEMA", "DamagedPart", "DuplicateKeys", "StorageError", "StudyLocked",
           "atomic_write_bytes", "atomic_write_json", "atomic_write_table", "cleanup", "commit_batch", "commits_dir",
           "committed", "dataset_dirs", "describe_holder", "drop_damaged", "holds_lock", "load", "lock_path",
           "manifest_path", "parts", "read_commits", "read_keys", "read_manifest", "recovery_hint", "stored_keys",
           "study_lock", "verify", "write_manifest"]
