"""Study storage: parts, commit records (checksums), the manifest, the study lock and ``load``.

This module knows nothing of Ray; the guarantees of a study directory are read and tested here.
``docs/storage.md`` states them with what was measured.

Layout under ``out`` (one *study directory* per ``--out``)::

    out/_study.lock                               the writer's lock (holder: host, pid, run, argv)
    out/<study>/_manifest.json                    configuration, versions, runs (atomic JSON)
    out/<study>/part-<run>-<n>.parquet            trajectories
    out/<study>/_commits/part-<run>-<n>.json      commit record of batch <run>-<n> (see below)
    out/<study>_intervals/part-<run>-<n>.parquet  confidence intervals (when recorded)
    out/<study>_failures/part-<run>-<n>.parquet   failed replications

**Atomic files.** Every file is written to a temporary ``_tmp-*`` name, flushed and fsync'ed, then
renamed into place (``os.replace``) and the directory fsync'ed, so a reader sees a whole file or
none.

**Commit records.** A batch of replications is written as up to three parts (intervals, failures,
trajectories) and then its commit record, written atomically *after* the parts: the SHA-256, byte
size and row count of each part and the keys ``(setting, method, M, rep)`` it holds.  Only parts
named by a commit record exist for :func:`load` and for resume; a part without one (a crash between
the part and its record) is deleted by the next writer.  Every read verifies each part against its
record (:class:`DamagedPart` names the file and the recovery command) and checks that no key is
stored twice (:class:`DuplicateKeys` names both files).

**One writer.** :func:`study_lock` takes an exclusive POSIX lock (``fcntl.lockf``) on
``out/_study.lock`` for the whole run: a second writer is refused with :class:`StudyLocked`, which
names the holder recorded in the file.  The kernel releases the lock when the holder dies, however
it dies; on NFS the lock goes through the server's lock manager (lockd/NLM, or NFSv4 state), which
releases it when the client's lease expires.

**Recovery.** ``python -m study.storage verify OUT [STUDY ...]`` checks every part;
``python -m study.storage drop-damaged OUT STUDY`` moves the damaged parts (and the other parts and
the record of the same batch) to ``out/<study>/_damaged/``; rerunning the study's command then
recomputes exactly those replications.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

STORAGE_FORMAT = 2  # 2: commit records with checksums, shared seed namespace, pair-regret columns
KEY_COLUMNS = ("setting", "method", "M", "rep")
LOCK_NAME = "_study.lock"
COMMITS = "_commits"
DAMAGED = "_damaged"

_INT32 = pa.int32()
TRAJECTORY_SCHEMA = pa.schema([
    ("study", pa.string()), ("setting", pa.string()), ("method", pa.string()),
    ("M", _INT32), ("T0", _INT32), ("T", _INT32), ("rep", _INT32), ("seed", pa.int64()),
    ("t", _INT32), ("major", _INT32), ("other", _INT32), ("explored", pa.bool_()),
    ("regret", pa.float64()), ("avg_regret", pa.float64()), ("rel_error", pa.float64()),
    ("pair_regret", pa.float64()), ("avg_pair_regret", pa.float64()),
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
SCHEMAS = {"trajectory": TRAJECTORY_SCHEMA, "intervals": INTERVAL_SCHEMA, "failures": FAILURE_SCHEMA}


class StorageError(RuntimeError):
    """A stored file cannot be trusted or read; the message names the file (one line)."""


class DamagedPart(StorageError):
    """A part does not match its commit record (or is missing, or its record is unreadable)."""


class DuplicateKeys(StorageError):
    """The same replication key is stored in two committed parts."""


class StudyLocked(StorageError):
    """Another process holds the study directory's lock."""


def recovery_hint(out, study) -> str:
    return (f"run `python -m study.storage drop-damaged {out} {study}`, then rerun the same command to "
            "recompute those replications")


# --------------------------------------------------------------------------------------------
# Paths and atomic files
# --------------------------------------------------------------------------------------------

def dataset_dirs(out, study) -> dict:
    out = Path(out)
    return {"trajectory": out / study, "intervals": out / f"{study}_intervals",
            "failures": out / f"{study}_failures"}


def manifest_path(out, study) -> Path:
    return Path(out) / study / "_manifest.json"


def commits_dir(out, study) -> Path:
    return Path(out) / study / COMMITS


def parts(directory) -> list:
    directory = Path(directory)
    return sorted(directory.glob("part-*.parquet")) if directory.is_dir() else []


def _fsync_dir(directory: Path):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_replace(tmp: Path, path: Path):
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def atomic_write_bytes(data: bytes, path: Path):
    path = Path(path)
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex}-{path.name}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    _atomic_replace(tmp, path)


def atomic_write_json(obj, path: Path):
    atomic_write_bytes((json.dumps(obj, indent=2, default=str) + "\n").encode(), path)


def atomic_write_table(table: pa.Table, path: Path) -> dict:
    """Write ``table`` as Parquet at ``path`` atomically; returns its record (sha256, bytes, rows)."""
    path = Path(path)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    atomic_write_bytes(data, path)
    return {"file": path.name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "rows": table.num_rows}


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(out, study):
    """The manifest of ``study`` (None if there is none); :class:`StorageError` naming the file if
    it cannot be read."""
    path = manifest_path(out, study)
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"{path}: unreadable manifest ({type(exc).__name__}: {exc}); restore it, or "
                           "rerun with --fresh to discard this study's results") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("runs", []), list):
        raise StorageError(f"{path}: not a study manifest (expected a JSON object with a 'runs' list); "
                           "restore it, or rerun with --fresh to discard this study's results")
    return manifest


def write_manifest(manifest: dict, out, study):
    atomic_write_json(manifest, manifest_path(out, study))


# --------------------------------------------------------------------------------------------
# The study lock
# --------------------------------------------------------------------------------------------

_HELD: dict = {}  # lock path -> [fd, depth]: POSIX locks are per process, so never reopen a held one


def lock_path(out) -> Path:
    return Path(out) / LOCK_NAME


def describe_holder(path: Path) -> str:
    """What the lock file says about its holder (read by a process that does NOT hold the lock)."""
    info = {}
    for _ in range(20):  # the holder writes its record right after locking: allow it a moment
        try:
            info = json.loads(Path(path).read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if info:
            break
        time.sleep(0.05)
    if not info:
        return "another process (it has not recorded itself yet)"
    argv = " ".join(str(a) for a in info.get("argv") or [])
    return (f"run {info.get('run_id')} (pid {info.get('pid')} on host {info.get('host')}, started "
            f"{info.get('started')}: {argv})")


class study_lock:
    """Hold the exclusive writer lock of study directory ``out`` (re-entrant within a process).

    Raises :class:`StudyLocked` naming the holder if another process holds it, and
    :class:`StorageError` if ``out`` cannot be created or written."""

    def __init__(self, out, run_id: str = "", argv=None):
        self.out = Path(out)
        self.path = lock_path(self.out).resolve() if self.out.exists() else lock_path(self.out)
        self.run_id = run_id
        self.argv = list(sys.argv if argv is None else argv)

    def __enter__(self):
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{self.out}: cannot create the output directory ({exc.strerror})") from None
        self.path = lock_path(self.out).resolve()
        key = str(self.path)
        if key in _HELD:
            _HELD[key][1] += 1
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot create the study lock ({exc.strerror}); is "
                               f"{self.out} writable?") from None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise StudyLocked(f"{self.out} is in use by {describe_holder(self.path)}; one writer per "
                                  "study directory: wait for it to finish, or choose another --out") from None
            raise StorageError(f"{self.path}: cannot lock ({exc.strerror}); the filesystem may not "
                               "support POSIX locks") from None
        info = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": self.run_id,
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "argv": self.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        os.fsync(fd)
        _HELD[key] = [fd, 1]
        return self

    def __exit__(self, *exc):
        key = str(self.path)
        held = _HELD.get(key)
        if held is None:
            return False
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            try:
                os.ftruncate(held[0], 0)
            except OSError:
                pass
            os.close(held[0])  # releases the lock
        return False


def holds_lock(out) -> bool:
    return str(lock_path(out).resolve()) in _HELD


# --------------------------------------------------------------------------------------------
# Commit records and verification
# --------------------------------------------------------------------------------------------

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
        digest = file_sha256(path)
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


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

def load(out, study, what: str = "trajectory", columns=None, filter=None):
    """The stored table of ``study`` as a pandas DataFrame, sorted by its keys.

    Only committed, checksum-verified parts are read, and a key stored twice is an error
    (:class:`DamagedPart`, :class:`DuplicateKeys`: both name the files).  ``what`` is
    ``"trajectory"``, ``"intervals"`` or ``"failures"``; ``columns`` (a list) and ``filter`` (a
    ``pyarrow.dataset`` expression, e.g. ``pc.field("t") == pc.field("T")``) are applied while
    reading.  Failures are the current ones only: failures of replications that have since
    succeeded are dropped, and only the most recent record per key is kept."""
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


# --------------------------------------------------------------------------------------------
# python -m study.storage verify|drop-damaged
# --------------------------------------------------------------------------------------------

def _studies_in(out: Path) -> list:
    return sorted(p.name for p in out.iterdir() if (p / "_manifest.json").exists() or (p / COMMITS).is_dir()) \
        if out.is_dir() else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m study.storage",
        description="Check a study directory's parts against their checksums, or drop the damaged "
                    "ones so that rerunning the study's command recomputes them.")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check every part of every (or the named) study; exit 1 if any is damaged")
    v.add_argument("out")
    v.add_argument("studies", nargs="*")
    d = sub.add_parser("drop-damaged", help="move damaged batches to <study>/_damaged/ (then rerun the command)")
    d.add_argument("out")
    d.add_argument("study")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.is_dir():
        parser.error(f"{out} is not a directory")
    try:
        if args.command == "drop-damaged":
            lost = drop_damaged(out, args.study)
            print(f"{args.study}: {lost} replications to recompute; rerun the study's command")
            return 0
        status = 0
        for study in args.studies or _studies_in(out):
            report = verify(out, study)
            bad = report["damaged"] or report["duplicates"]
            print(f"{study}: {report['commits']} batches, {report['replications']} replications, "
                  f"{len(report['damaged'])} damaged files, {len(report['duplicates'])} duplicated keys, "
                  f"{len(report['uncommitted'])} uncommitted parts" + ("" if bad else ": ok"))
            for path, reason, _, n in report["damaged"]:
                print(f"  damaged: {path}: {reason} ({n} replications)")
            for key, a, b in report["duplicates"][:10]:
                print(f"  duplicate: {'/'.join(map(str, key))} in {a} and {b}")
            if bad:
                print(f"  to recover: {recovery_hint(out, study)}")
                status = 1
        return status
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
