"""Commit records, read as untrusted input: what a record may name, and the check of a part
against its record.

A record is written by :func:`study.results.storage.commit_batch` as ``_commits/<batch>.json``
and names the parts of its batch, ``<batch>.parquet`` in each dataset directory.  A record read
back is trusted only as far as it keeps to that form: every file it names must be that plain
name (no separator, no ``..``, not absolute), in a known dataset, with a SHA-256, a size and a row
count, and its keys must be ``[setting, method, M, rep]``.  Anything else is damage: reported,
and the named path is never opened, moved or deleted.  A part that matches its checksum must
also hold exactly the replications its record lists (its key columns and its ``study`` column
are read and compared), so a part copied from another run or study cannot be counted.
"""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._util import sha256_file
from .schema import KEY_COLUMNS

DATASETS = ("trajectory", "intervals", "failures", "costs")
PART_NAME = re.compile(r"part-[A-Za-z0-9_-][A-Za-z0-9_.-]*\.parquet")  # part-<run>-<n>.parquet
_SEPARATORS = ("/", "\\", "\x00")

_VERIFIED: dict = {}  # file identity -> sha256, so one process hashes a file once
_CONTENTS: dict = {}  # file identity -> (rows, studies, keys) read from the part's columns


def read_record(path: Path):
    """(record, None) or (None, why it cannot be used); never raises for bad content, and never
    follows a link."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return None, "a symbolic link, not a commit record (never followed)"
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"unreadable commit record ({exc})"
    problem = record_problem(record)
    return (None, problem) if problem else (record, None)


def _is_key(key, width=4) -> bool:
    return (isinstance(key, list) and len(key) == width and isinstance(key[0], str) and isinstance(key[1], str)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in key[2:]))


def record_problem(record) -> str | None:
    """Why ``record`` is not a commit record (None if it is one): the structure only, not the
    file names (:func:`name_problem`)."""
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return "not a commit record (expected a JSON object with a 'files' object)"
    for what, info in record["files"].items():
        if not isinstance(info, dict):
            return f"its entry for {what!r} is not an object"
    for field in ("keys", "failed_keys"):
        keys = record.get(field, [])
        if not isinstance(keys, list) or not all(_is_key(k) for k in keys):
            return f"its {field!r} are not a list of [setting, method, M, rep]"
    return None


def expected_name(record_path: Path) -> str:
    """The one part name a record may give: its own batch's, ``<record stem>.parquet``."""
    return Path(record_path).stem + ".parquet"


def name_problem(record_path: Path, what: str, info: dict) -> str | None:
    """Why the entry ``info`` of dataset ``what`` in the record at ``record_path`` cannot be
    followed (None if it names its batch's own part)."""
    name = info.get("file")
    if what not in DATASETS:
        return f"names a part of an unknown dataset {what!r} (never followed)"
    if not isinstance(name, str):
        return f"names {what} part {name!r}, which is not a file name (never followed)"
    if any(sep in name for sep in _SEPARATORS) or ".." in name or os.path.isabs(name):
        return (f"names {what} part {name!r}, a path outside its own dataset directory (only a plain file "
                "name is allowed; never followed, moved or deleted)")
    if name != expected_name(record_path) or not PART_NAME.fullmatch(name):
        return (f"names {what} part {name!r}, which is not its own batch's part {expected_name(record_path)!r} "
                "(never followed, moved or deleted)")
    if not isinstance(info.get("sha256"), str) or not isinstance(info.get("bytes"), int) \
            or not isinstance(info.get("rows"), int):
        return f"its {what} entry lacks the part's SHA-256, size or row count"
    return None


def _identity(path: Path, st) -> tuple:
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def check_part(path: Path, info: dict, what: str, study: str, record: dict) -> str | None:
    """None if the part at ``path`` matches its record entry ``info``, else the reason: missing,
    a link, its size or SHA-256, its row count, or the replications (key columns) and the study it
    holds.  A link is never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link, not a part file (never followed)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size != info.get("bytes"):
        return f"size {st.st_size} bytes, recorded {info.get('bytes')}"
    key = _identity(path, st)
    digest = _VERIFIED.get(key)
    if digest is None:
        digest = sha256_file(path)
    if digest != info.get("sha256"):
        return "SHA-256 differs from the one recorded when it was written"
    _VERIFIED[key] = digest
    contents = _CONTENTS.get(key)
    if contents is None:
        try:
            table = pq.ParquetFile(path).read(columns=["study", *KEY_COLUMNS], use_threads=False)
        except Exception as exc:  # noqa: BLE001 -- verified bytes that do not parse are damage
            return f"cannot be read as a part ({type(exc).__name__}: {exc})"
        unique = table.group_by(list(KEY_COLUMNS)).aggregate([]).to_pydict()  # a few keys, not every row
        contents = _CONTENTS[key] = (table.num_rows, frozenset(pc.unique(table.column("study")).to_pylist()),
                                     frozenset(zip(*(unique[c] for c in KEY_COLUMNS))))
    rows, studies, keys = contents
    if rows != info.get("rows"):
        return f"holds {rows} rows, its record says {info.get('rows')}"
    if studies - {study}:
        return f"holds rows of study {sorted(studies - {study})}, not of {study!r} (copied from elsewhere?)"
    listed = {tuple(k) for k in record.get("failed_keys" if what == "failures" else "keys", [])}
    extra = keys - listed
    if extra:
        return (f"holds {len(extra)} replication(s) its commit record does not list "
                f"(e.g. {'/'.join(map(str, sorted(extra)[0]))}): not this batch's part")
    if what == "trajectory" and listed - keys:
        return (f"lacks {len(listed - keys)} replication(s) its commit record lists "
                f"(e.g. {'/'.join(map(str, sorted(listed - keys)[0]))})")
    return None
