"""Paths of a study directory, atomic file writes and the manifest.

Every file is written to a temporary ``_tmp-*`` name, flushed and fsync'ed, then renamed into place
(``os.replace``) and the directory fsync'ed, so a reader sees a whole file or none.  A write that
fails (a full disk, a lost permission) removes its temporary file and raises :class:`WriteFailed`
naming the file, in one line.

Links are never followed inside a study directory: the dataset directories, ``_commits/``,
``_damaged/`` and the manifest must be plain directories and files (:func:`check_no_links`), or the
operation is refused with :class:`PlantedLink` naming the link, before anything is read, written,
moved or deleted.  ``--out`` itself may be a link: it is the user's own path.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import PlantedLink, StorageError, WriteFailed

COMMITS = "_commits"
DAMAGED = "_damaged"


def dataset_dirs(out, study) -> dict:
    out = Path(out)
    return {"trajectory": out / study, "intervals": out / f"{study}_intervals",
            "failures": out / f"{study}_failures", "costs": out / f"{study}_costs"}


def manifest_path(out, study) -> Path:
    return Path(out) / study / "_manifest.json"


def commits_dir(out, study) -> Path:
    return Path(out) / study / COMMITS


def parts(directory) -> list:
    """The ``part-*.parquet`` entries of ``directory`` (not followed when it is a link; never
    directories)."""
    directory = Path(directory)
    if directory.is_symlink() or not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("part-*.parquet") if p.is_symlink() or not p.is_dir())


def _link_message(path: Path, what: str) -> str:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return (f"{path} is a symbolic link{target}, where {what} must be; links inside a study directory are "
            "never followed (a planted link could make a run overwrite, move or delete files outside "
            "--out): remove the link, or give the directory it points to as --out")


def study_paths(out, study) -> dict:
    """{path: what it must be} of the entries of ``study`` that must never be links."""
    dirs = dataset_dirs(out, study)
    return {**{d: f"the {what} directory" for what, d in dirs.items()},
            commits_dir(out, study): "the commit-record directory",
            dirs["trajectory"] / DAMAGED: "the directory of damaged batches",
            manifest_path(out, study): "the manifest file"}


def check_no_links(out, study) -> None:
    """:class:`PlantedLink` naming the first entry of ``study`` under ``out`` that is a symbolic
    link (or, where a directory belongs, exists and is not one); never follows a link."""
    for path, what in study_paths(out, study).items():
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageError(f"{path}: cannot be inspected ({exc.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            raise PlantedLink(_link_message(path, what))
        wants_dir = what != "the manifest file"
        if wants_dir != stat.S_ISDIR(st.st_mode):
            raise PlantedLink(f"{path} is not a {'directory' if wants_dir else 'regular file'}, where {what} "
                              "must be; move it out of the way or choose another --out")


def make_dir(path: Path) -> None:
    """``mkdir -p`` of a study directory's own directory: refused if it is a link, one line
    (:class:`WriteFailed`) if it cannot be created."""
    path = Path(path)
    if path.is_symlink():
        raise PlantedLink(_link_message(path, "a directory of the study"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteFailed(_write_message(path, exc)) from None


def _write_message(path: Path, exc: OSError) -> str:
    cause = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = "free space on that filesystem (or choose another --out)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "restore write permission on it (or choose another --out)"
    else:
        advice = "fix the cause (or choose another --out)"
    return (f"{path}: cannot write ({cause}); the replications committed before this are stored: {advice} "
            "and rerun the same command to resume")


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
    """Write ``data`` at ``path`` atomically; :class:`WriteFailed` naming ``path`` (its temporary
    file removed) if the disk is full, permission is lost, ...  Replacing ``path`` never follows
    a link there (the rename replaces the link itself)."""
    path = Path(path)
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex}-{path.name}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _atomic_replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteFailed(_write_message(path, exc)) from None


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


def read_manifest(out, study):
    """The manifest of ``study`` (None if there is none); :class:`StorageError` naming the file if
    it cannot be read."""
    path = manifest_path(out, study)
    if path.is_symlink():
        raise PlantedLink(_link_message(path, "the manifest file"))
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
