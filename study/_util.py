"""Small utilities with one home each: importing ``module:Name`` paths and hashing files.

Nothing here computes a number of a replication, so this module is outside the core source hash
(:func:`study.runner.fingerprint.core_source_hash`).
"""
from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

_BLOCK = 1 << 20


def import_object(path: str, *, what: str = "object"):
    """The object named by ``"package.module:Name"`` (``Name`` may be dotted).

    Raises ``ValueError`` naming ``path`` when it is malformed, its module does not import or the
    attribute is missing; ``what`` names the role in the message (e.g. ``"method"``)."""
    if not isinstance(path, str):
        raise ValueError(f"{what} {path!r}: an import path is a string 'package.module:Name'")
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname:
        raise ValueError(f"{what} {path!r}: an import path reads 'package.module:Name'")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 -- any failure to import is a bad name
        raise ValueError(f"{what} {path!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc}); "
                         "it must be importable here and on every Ray worker") from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what} {path!r}: module {module_name!r} has no attribute {qualname!r}")
        obj = getattr(obj, part)
    return obj


def sha256_file(path) -> str:
    """SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_files(paths, root=None) -> str:
    """One SHA-256 over several files: each file's name (relative to ``root`` when given, else its
    base name) and bytes, in the order given."""
    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        name = path.relative_to(root).as_posix() if root is not None else path.name
        h.update(name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def lazy_exports(package: str, exports: dict):
    """``(__getattr__, __dir__)`` for a package whose public names are imported when first used
    (PEP 562), so that importing one light part of it (``study.online.Client``) does not import
    the rest (scipy, pandas, matplotlib, Ray).  ``exports`` maps each public name to its module,
    relative to ``package`` (``".client"``); a subpackage's own name imports it too."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), name)
        setattr(importlib.import_module(package), name, value)  # found directly the next time
        return value

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(exports))

    import copyreg
    import importlib
    import sys
    import types

    class Package(type(sys.modules[package])):
        """The package, whose public names are never replaced by a submodule of the same name
        (``study.core.bootstrap`` is the function, as when it was imported eagerly, not the
        module that the import system would set there when it first loads the submodule)."""

        def __setattr__(self, name, value):
            if name in exports and isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}":
                return
            super().__setattr__(name, value)

    sys.modules[package].__class__ = Package
    # pickled as the module it is (by name), as pickle and Ray's cloudpickle do a plain module: they
    # know types.ModuleType itself, not a subclass (a user policy whose globals name study crossed
    # to the Ray workers this way)
    copyreg.pickle(Package, lambda module: (importlib.import_module, (module.__name__,)))
    return __getattr__, __dir__
