"""Paths of a study directory, atomic file writes and the manifest.

Every file is written to a temporary ``_tmp-*`` name, flushed and fsync'ed, then renamed into place
(``os.replace``) and the directory fsync'ed, so a reader sees a whole file or none.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import StorageError

COMMITS = "_commits"
DAMAGED = "_damaged"


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
