"""Policy names: the built-in methods, names registered with :func:`register_policy`, and import
paths ``"package.module:Name"``.  A name resolves to a *factory*: a class or callable that takes
the resolved :class:`study.Setting` and returns a policy (an object with ``select(step)``)."""
from __future__ import annotations

import sys
from pathlib import Path

from .._util import import_object, sha256_files
from ..simulation.settings import public_view
from .bald import bald
from .colstim import colstim, colstim_rev
from .guro import guro
from .maxfirst import max_first_ucb_next
from .maxinp import maxinp
from .maxpair import max_pair_ucb
from .paper import bt_ucb1, bt_ucb2, era, eta, rb
from .provenance import UnhashablePolicy, hash_source
from .rb_ua import rb_ua
from .thompson import thompson

METHODS = ("RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2")  # the paper's five
# from the dueling-bandit literature and this project (docs/baselines.md)
BASELINES = ("TS", "MaxInP", "MaxPairUCB", "MaxFirstUCBNext", "CoLSTIM", "CoLSTIM-rev", "GURO", "BALD", "RB-UA")
ALL_METHODS = METHODS + BASELINES
BUILTIN = {"RB": rb, "ERA": era, "ETA": eta, "BT-UCB1": bt_ucb1, "BT-UCB2": bt_ucb2,
           "TS": thompson, "MaxInP": maxinp, "MaxPairUCB": max_pair_ucb, "MaxFirstUCBNext": max_first_ucb_next,
           "CoLSTIM": colstim, "CoLSTIM-rev": colstim_rev, "GURO": guro, "BALD": bald, "RB-UA": rb_ua}
# the methods whose rule needs Phi, so that Setting.warmup applies to them (study.policies.warmup)
NEEDS_PHI = ("BT-UCB1", "BT-UCB2", "TS", "MaxInP", "MaxPairUCB", "MaxFirstUCBNext", "CoLSTIM", "CoLSTIM-rev",
             "GURO", "BALD")
assert tuple(BUILTIN) == ALL_METHODS
MAX_NAME = 100
_REGISTERED: dict = {}
_UNHASHABLE_ALLOWED: set = set()  # registered names whose source may go unhashed (the user opted in)


def register_policy(name: str, factory, *, replace: bool = False, allow_unhashable: bool = False):
    """Make ``name`` a method: ``factory(setting)`` must return a policy (``select(step) -> Choice``).

    Registration lives in this process only: a Ray worker resolves built-in names and import
    paths itself, while a registered factory reaches the workers through the engine (by value).
    ``replace=True`` allows re-registering a name; built-in names cannot be taken.  The runner
    records a hash of the factory's source (:func:`policy_provenance`); a factory without source on
    disk (a notebook cell) is refused there unless ``allow_unhashable=True``, which records it as
    unhashable: a resume then cannot tell edited code from the stored results'.  Returns
    ``factory``."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"a policy name must be a non-empty string without surrounding spaces, got {name!r}")
    if ":" in name:
        raise ValueError(f"policy name {name!r} contains ':', which marks an import path 'package.module:Name'")
    if any(c in "/\\" or not c.isprintable() for c in name) or name.startswith(".") or len(name) > MAX_NAME:
        raise ValueError(f"policy name {name!r}: a method name labels outputs and is part of file names, so it may "
                         f"not contain '/', '\\' or control characters nor start with '.' (at most {MAX_NAME} "
                         "characters)")
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in method ({list(BUILTIN)}); choose another name")
    if not callable(factory):
        raise ValueError(f"the factory for {name!r} must be a class or callable taking a Setting, got {factory!r}")
    if name in _REGISTERED and not replace and _REGISTERED[name] is not factory:
        raise ValueError(f"policy name {name!r} is already registered; pass replace=True to re-register it")
    _REGISTERED[name] = factory
    _UNHASHABLE_ALLOWED.discard(name)
    if allow_unhashable:
        _UNHASHABLE_ALLOWED.add(name)
    return factory


def unregister_policy(name: str) -> None:
    _REGISTERED.pop(name, None)
    _UNHASHABLE_ALLOWED.discard(name)


def registered_policies() -> dict:
    """The user-registered names and their factories (a copy)."""
    return dict(_REGISTERED)


def _import_path(path: str):
    factory = import_object(path, what="method")
    if not callable(factory):
        raise ValueError(f"method {path!r}: {path.partition(':')[2]!r} is not a class or callable")
    return factory


def resolve_policy(name):
    """The factory behind a method name; ``ValueError`` naming it when it is unknown or does not import."""
    if isinstance(name, str):
        if name in BUILTIN:
            return BUILTIN[name]
        if name in _REGISTERED:
            return _REGISTERED[name]
        if ":" in name:
            return _import_path(name)
    registered = f" or registered ({sorted(_REGISTERED)})" if _REGISTERED else ""
    raise ValueError(f"unknown method {name!r}; allowed: {list(BUILTIN)}{registered}, or an import path "
                     "'package.module:Name' of a policy factory")


def check_method(method) -> str:
    """``method`` if it names a policy: one of :data:`ALL_METHODS`, a name registered with
    :func:`study.register_policy`, or an import path ``"package.module:Name"`` whose module's file
    is found on ``sys.path`` (not imported here: a user module's top-level code runs only in
    confined processes); ``ValueError`` naming it otherwise."""
    if is_import_path(method):
        module_name, _, qualname = method.partition(":")
        if not module_name or not qualname:
            raise ValueError(f"method {method!r}: an import path reads 'package.module:Name'")
        if locate_module(module_name) is None:
            raise ValueError(f"method {method!r}: cannot import module {module_name!r} (no .py file or package of "
                             "that name on sys.path); it must be importable here and on every Ray worker")
        return method
    resolve_policy(method)
    return method


def is_import_path(name) -> bool:
    """Does ``name`` name a policy by import path (not a built-in or registered name)?"""
    return isinstance(name, str) and name not in BUILTIN and name not in _REGISTERED and ":" in name


def locate_module(module_name: str, path=None):
    """The source file (resolved ``Path``) of module ``module_name`` found by walking ``sys.path``
    (or ``path``) as the import system would -- a package's ``__init__.py`` or a ``.py`` file --
    without importing it or its parent packages (whose ``__init__`` would run); None if not found."""
    parts = module_name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for entry in sys.path if path is None else path:
        folder = Path(entry or ".")
        for package in parts[:-1]:
            folder = folder / package
        if not folder.is_dir():
            continue
        for candidate in (folder / parts[-1] / "__init__.py", folder / f"{parts[-1]}.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def resolve_methods(names) -> dict:
    """``{name: factory}`` for every name, in order, importing each import path now; raises
    ``ValueError`` naming the first bad one (call it before Ray starts)."""
    if isinstance(names, str):
        names = [names]
    return {name: resolve_policy(name) for name in names}


def make_policy(method, setting, factory=None):
    """A fresh policy for one replication: ``factory(setting)`` with the setting's public view
    (:class:`study.simulation.settings.PublicSetting`: every field but the truth), the factory
    resolved from ``method`` unless given."""
    factory = resolve_policy(method) if factory is None else factory
    policy = factory(public_view(setting))
    if not callable(getattr(policy, "select", None)):
        raise TypeError(f"the factory of method {method!r} returned {type(policy).__name__!r}, which has no "
                        "select(step) method")
    return policy


def policy_provenance(name, factory=None) -> dict:
    """Where a method's code, parameters and inputs come from, for a results fingerprint:
    ``{"method", "kind" ("builtin" | "registered" | "import"), "import_path" ("module:qualname", or
    None when the factory cannot be imported by name: a lambda, a local or ``__main__`` object),
    "source_file", "source_sha256", "files", "state", "state_sha256", "inputs", "inputs_sha256"}``.

    For a built-in method the hash covers every module of :mod:`study.policies`.  For a user policy
    (:mod:`study.policies.provenance`) ``files`` maps every file of its package (data files too)
    and the modules of its source tree that they import to their SHA-256, so that a refused resume
    can name the file that changed; ``state`` the factory's parameters (closure cells, defaults,
    ``functools.partial`` arguments, a callable instance's attributes) to theirs; ``inputs`` what
    the factory declares in ``policy_inputs`` (files, ``"$NAME"`` environment variables) to theirs.
    A factory without source on disk raises :class:`study.policies.provenance.UnhashablePolicy` (a
    ``ValueError``), unless it was registered with ``allow_unhashable=True``: its record then has
    ``"unhashable"`` (the reason) and no hash, never a silent None."""
    factory = resolve_policy(name) if factory is None else factory
    kind = "builtin" if name in BUILTIN else ("import" if isinstance(name, str) and ":" in name else "registered")
    target = getattr(factory, "func", factory)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    importable = bool(module and qualname and module != "__main__" and "<" not in qualname)
    record = {"method": name, "kind": kind, "import_path": f"{module}:{qualname}" if importable else None}
    empty = dict.fromkeys(("files", "state", "state_sha256", "inputs", "inputs_sha256"))
    if kind == "builtin":
        files = sorted(Path(__file__).resolve().parent.glob("*.py"))
        return {**record, "source_file": str(Path(__file__).resolve().parent), "source_sha256": sha256_files(files),
                **empty}
    try:
        return {**record, **hash_source(factory, name)}
    except UnhashablePolicy as exc:
        if name not in _UNHASHABLE_ALLOWED:
            raise
        return {**record, "source_file": None, "source_sha256": None, **empty, "unhashable": str(exc)}
