"""What fixes a study's numbers (its *fingerprint*), and the check of stored results against it.

The fingerprint holds the resolved settings, the methods, the root seed and seed namespace, the
package version, the storage format, the hash of the code that computes a replication
(:func:`core_source_hash`), the import path and source hash of each user policy and, for a replay,
the hashes of its code and data.  A resume whose fingerprint differs from the stored one is refused
(:class:`ConfigMismatch`), naming what differs.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import _version
from .._util import sha256_file, sha256_files
from ..policies import ALL_METHODS, policy_provenance
from ..policies.described import import_path_provenance
from ..policies.registry import is_import_path
from ..results import storage
from ..results.storage import StorageError, dataset_dirs, read_manifest

# The packages whose code computes a replication: the statistical core, the simulation layer and
# the built-in policies.  The hash is defined by directory, so a module added to the runner, the
# results or the CLI never changes it, and any module added here always does.
CORE_PACKAGES = ("core", "simulation", "policies")
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


class ConfigMismatch(RuntimeError):
    """Stored results were produced by a different configuration."""


def core_source_files() -> list:
    """The source files of :data:`CORE_PACKAGES`, sorted by path."""
    return sorted(p for package in CORE_PACKAGES for p in (_PACKAGE_ROOT / package).rglob("*.py"))


def core_source_hash() -> str:
    """SHA-256 over the path (relative to ``study/``) and bytes of every file of
    :func:`core_source_files`, so that results of edited core code are never mixed with stored
    ones even when the package version did not change."""
    return sha256_files(core_source_files(), root=_PACKAGE_ROOT)


def core_source_digests() -> dict:
    """{path relative to ``study/``: SHA-256} of every file of :func:`core_source_files`, so that a
    refused resume can name the files that changed."""
    return {p.relative_to(_PACKAGE_ROOT).as_posix(): sha256_file(p) for p in core_source_files()}


def jsonable(obj):
    """``obj`` as plain JSON values (arrays as lists, anything else unknown as its ``str``)."""
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def plan_fingerprint(plan) -> dict:
    """Everything that affects the numbers of ``plan`` (not ``reps``: more reps only add keys)."""
    fingerprint = {
        "study": plan.study,
        "root_seed": int(plan.root_seed),
        "seed_namespace": plan.namespace,
        "storage_format": storage.STORAGE_FORMAT,
        "package_version": _version.__version__,
        "core_source_sha256": core_source_hash(),
        "core_source_files": core_source_digests(),
        "cells": [{"setting": c.setting, "method": c.method, "M": c.M, "resolved_setting": setting_record(c)}
                  for c in plan.cells],
    }
    policies = policy_records(plan.cells)
    if policies:  # user policies: their import path and source hash (built-ins are in the core hash)
        fingerprint["policies"] = policies
    if plan.provenance:
        fingerprint["replay"] = jsonable(dict(plan.provenance))
    return fingerprint


POLICY_FIELDS = ("kind", "import_path", "source_sha256", "files", "state", "state_sha256", "inputs", "inputs_sha256",
                 "unhashable")


def policy_records(cells) -> dict:
    """{method: kind, import path, source hash, hash of each file, of each parameter and of each
    declared input} of the user policies among ``cells`` (:func:`study.policies.policy_provenance`; a policy whose source cannot
    be hashed raises ``UnhashablePolicy``, a ``ValueError``, unless the user opted in)."""
    records = {}
    for cell in cells:
        if cell.method not in records and cell.method not in ALL_METHODS:
            record = (import_path_provenance(cell.method) if is_import_path(cell.method)  # never imported here
                      else policy_provenance(cell.method))
            records[cell.method] = {k: record.get(k) for k in POLICY_FIELDS if k in record}
    return records


def setting_record(cell) -> dict:
    """The resolved setting as JSON; for a replay cell the data-sized fields (truth, graph) are
    recorded by their SHA-256 (the arena graph alone has 3,460 edges)."""
    record = jsonable(cell.resolve().to_dict())
    record.pop("time_limit", None)  # decides only whether a replication is stored, never its numbers
    if cell.base is not None:
        for key in ("truth", "edges"):
            if isinstance(record.get(key), list):
                record[key] = {"sha256": hashlib.sha256(json.dumps(record[key]).encode()).hexdigest()}
    return record


def check_stored(plan, out):
    """The stored manifest of ``plan.study`` under ``out`` (None if nothing is stored).

    Raises
    ------
    ConfigMismatch
        The stored results come from a different configuration (the message names what differs).
    study.results.storage.StorageError
        The manifest cannot be read (naming the file).
    """
    out = Path(out).expanduser().resolve()
    dirs = dataset_dirs(out, plan.study)
    existing = read_manifest(out, plan.study)
    if existing is not None and existing.get("fingerprint") != plan.fingerprint():
        raise ConfigMismatch(
            f"{dirs['trajectory']} holds results of a different configuration "
            f"({describe_difference(existing.get('fingerprint'), plan.fingerprint())}). "
            f"{_keep_or_delete(out, plan.study)}")
    if existing is None and any(storage.parts(d) for d in dirs.values()):
        raise ConfigMismatch(f"{dirs['trajectory']} holds results but no _manifest.json. "
                             f"{_keep_or_delete(out, plan.study)}")
    return existing


def _keep_or_delete(out: Path, study: str) -> str:
    """The two ways on after a refusal, the one that keeps the stored results first."""
    other = out.parent / f"{out.name}-{study}-2"
    return (f"To keep them, choose another --out (e.g. --out {other}); to delete them, rerun with --fresh "
            f"(it deletes the stored results of study {study!r} in {out}).")


def describe_difference(old, new) -> str:
    """What differs between a stored fingerprint ``old`` and a requested one ``new``, in words."""
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
    if old.get("policies") != new.get("policies"):
        diffs.append(_policies_difference(old.get("policies") or {}, new.get("policies") or {}))
    if old.get("cells") != new.get("cells"):
        diffs.append(_cells_difference(old.get("cells", []), new.get("cells", [])))
    if old.get("core_source_files") != new.get("core_source_files") and diffs and diffs[0].startswith("the bandit"):
        diffs[0] += _files_difference(old.get("core_source_files"), new.get("core_source_files"))
    named = {"core_source_sha256", "core_source_files", "storage_format", "study", "root_seed", "seed_namespace",
             "package_version", "replay", "policies", "cells"}
    for key in sorted((set(old) | set(new)) - named):
        if old.get(key) != new.get(key):
            diffs.append(f"{key}: stored {old.get(key)!r}, requested {new.get(key)!r}")
    return "; ".join(d for d in diffs if d) or "fingerprint differs"


def _files_difference(old, new) -> str:
    """" (changed: a.py, b.py; added: c.py; removed: d.py)" between two {file: sha256} maps."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    parts = [(label, sorted(names)) for label, names in (
        ("changed", [f for f in set(old) & set(new) if old[f] != new[f]]),
        ("added", set(new) - set(old)), ("removed", set(old) - set(new))) if names]
    return " (" + "; ".join(f"{label}: {', '.join(names)}" for label, names in parts) + ")" if parts else ""


def _policies_difference(old: dict, new: dict) -> str:
    """Which user policies changed, and how, in words."""
    out = []
    for method in sorted(set(old) | set(new)):
        a, b = old.get(method), new.get(method)
        if a == b:
            continue
        if a is None or b is None:
            out.append(f"user policy {method!r} {'added' if a is None else 'removed'}")
            continue
        what = []
        if a.get("import_path") != b.get("import_path"):
            what.append(f"import path {a.get('import_path')!r} -> {b.get('import_path')!r}")
        if a.get("source_sha256") != b.get("source_sha256"):
            files = _files_difference(a.get("files"), b.get("files"))
            what.append(f"its source code changed{files}" if files or a.get("source_sha256") else
                        "its source is now hashed (stored without a source hash)")
        if a.get("state_sha256") != b.get("state_sha256"):
            what.append("its parameters (the factory's state) changed"
                        + _files_difference(a.get("state") or {}, b.get("state") or {}))
        if a.get("inputs_sha256") != b.get("inputs_sha256"):
            what.append("its declared inputs (policy_inputs) changed"
                        + _files_difference(a.get("inputs") or {}, b.get("inputs") or {}))
        if a.get("unhashable") != b.get("unhashable"):
            what.append("it is recorded without a source hash (allow_unhashable)")
        out.append(f"user policy {method!r}: {', '.join(what) or 'its record changed'}")
    return "; ".join(out)


def _cells_difference(old_cells, new_cells) -> str:
    """How two fingerprints' cell lists differ, in words ("" if they do not): the settings, methods
    or M values that differ, and the first setting whose resolved fields differ."""
    old = {(c["setting"], c["method"], c["M"]): c for c in old_cells}
    new = {(c["setting"], c["method"], c["M"]): c for c in new_cells}
    parts = []
    for index, what in ((0, "settings"), (1, "methods"), (2, "M")):
        a = list(dict.fromkeys(k[index] for k in old))
        b = list(dict.fromkeys(k[index] for k in new))
        if a != b and (index != 2 or not parts):  # M follows the settings: named only when they agree
            parts.append(f"{what}: stored {' '.join(map(str, a))}, requested {' '.join(map(str, b))}")
    for key in (k for k in new if k in old):
        a, b = old[key]["resolved_setting"], new[key]["resolved_setting"]
        changed = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        if changed:
            parts.append(f"setting {key[0]} fields {changed} differ "
                         f"(stored {[a.get(f) for f in changed]}, requested {[b.get(f) for f in changed]})")
            break
    return "; ".join(parts)


__all__ = ["CORE_PACKAGES", "ConfigMismatch", "StorageError", "check_stored", "core_source_files",
           "core_source_hash", "describe_difference", "plan_fingerprint", "policy_records", "setting_record"]
