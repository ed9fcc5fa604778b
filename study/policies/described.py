"""An import path's policy seen from a trusted process (the driver) without importing its module
there: its declarations (needs, inputs, parameters' digests) come from a confined process that
imports it (:mod:`study.policies.sandbox`, JSON checked here); its files are found by walking
``sys.path`` and hashed as read, never run."""
from __future__ import annotations

import sys
from pathlib import Path

from . import confine
from .hooks import needs_of
from .provenance import UnhashablePolicy, hash_located
from .registry import is_import_path, locate_module, resolve_policy
from .sandbox import ChannelError, ConfinedFactory, PolicyProcessError, _Process

_DESCRIBED: dict = {}


def describe_import_path(method: str) -> dict:
    """What an import path's factory declares (its needs, inputs, parameters' digests, module),
    found in a confined process (:func:`_describe`), never by importing its
    module here; kept while the module's file is unchanged.  ``ValueError`` when it does not import,
    :class:`UnhashablePolicy` when a parameter cannot be hashed."""
    path = locate_module(method.partition(":")[0])
    stat = path.stat() if path is not None else None
    key = (method, tuple(sys.path), str(path), stat and (stat.st_mtime_ns, stat.st_size))
    if key not in _DESCRIBED:
        try:
            _DESCRIBED[key] = _describe(method)
        except PolicyProcessError as exc:
            cls = UnhashablePolicy if exc.message.startswith("UnhashablePolicy") else ValueError
            raise cls(exc.message.partition(": ")[2] if cls is UnhashablePolicy else exc.message) from None
    return _DESCRIBED[key]


def declared_needs(method) -> frozenset:
    """The needs (:data:`study.policies.hooks.NEEDS`) a method's factory declares; an import path's
    are read in a confined process (:func:`describe_import_path`)."""
    if is_import_path(method):
        return frozenset(describe_import_path(method)["needs"])
    return needs_of(resolve_policy(method))


def import_path_provenance(name: str) -> dict:
    """:func:`study.policy_provenance` of an import path without importing it here: the factory's
    declarations come from a confined process; its files are found here by walking ``sys.path``
    and hashed as read (never run)."""
    found = describe_import_path(name)
    importable = bool(found["import_module"] and found["import_qualname"] and found["import_module"] != "__main__"
                      and "<" not in found["import_qualname"])
    record = {"method": name, "kind": "import",
              "import_path": f"{found['import_module']}:{found['import_qualname']}" if importable else None}
    path = locate_module(found["module"])
    if (path is None or found["file"] is None or Path(found["file"]).resolve() != path
            or any(Path(f).resolve() != path for f in found["code_files"])):
        raise UnhashablePolicy(f"policy {name!r}: its code cannot be hashed: it is defined in module "
                               f"{found['module']!r}, whose source file was not found on sys.path (imported from "
                               f"{found['file']!r}), so results of edited code could not be told apart from stored ones")
    return {**record, **hash_located(found["module"], path, found["state"], found["inputs"], name)}


def _describe(method: str, seconds: float = 120.0) -> dict:
    """The description (:func:`study.policies.provenance.description`) sent by a confined process
    that imported the method's module with no needs lifted, each value's type checked here."""
    process = _Process(ConfinedFactory(method, seconds=seconds), None, confine.status()["available"], describe=True)
    found = process.description
    strings = ("module", "file", "import_module", "import_qualname")
    if not (isinstance(found, dict) and set(found) == {*strings, "code_files", "needs", "inputs", "state"}
            and all(found[k] is None or isinstance(found[k], str) for k in strings)
            and all(isinstance(found[k], list) and all(isinstance(v, str) for v in found[k])
                    for k in ("code_files", "needs", "inputs"))
            and isinstance(found["state"], dict) and all(isinstance(v, str) for v in found["state"].values())):
        raise ChannelError(f"ChannelError: the description of policy {method!r} is not of the expected form")
    return found
