"""Where a user policy's code comes from, hashed so that stored results are never mixed with
results of edited code.

The hash of a policy covers every module its code can reach without leaving the user's source
tree: the module that defines the factory; every module of its top-level package when it lies in
one; and, followed through their ``import`` statements (read, not executed), the other modules
and packages of the same source root (the ``sys.path`` entry the module was imported from).  So an
edit to a helper module the policy imports changes the hash.  Installed libraries, the standard
library and :mod:`study` itself (covered by the core source hash) are not followed.

A callable instance (or a ``functools.partial``) is hashed by its class's code and by its state
(pickled).  A factory without source on disk (a notebook cell, ``exec``'d code, a module built at
run time) cannot be hashed: :class:`UnhashablePolicy` says so, unless the user opted in
(``study.register_policy(..., allow_unhashable=True)``), in which case the record says it is
unhashable instead of carrying a hash.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import pickle
import sys
from pathlib import Path

MAX_FILES = 2000  # a "package" larger than this is not the user's policy code
MAX_BYTES = 64 * 2 ** 20
_NOT_FOLLOWED = {"study"}


class UnhashablePolicy(ValueError):
    """A user policy whose source cannot be hashed (so results of edited code could not be told apart)."""


def _code_and_state(factory):
    """(the class or function whose source defines ``factory``, the state that parametrises it or
    None)."""
    if isinstance(factory, functools.partial):
        code, _ = _code_and_state(factory.func)
        return code, {"partial_args": factory.args, "partial_keywords": factory.keywords}
    if inspect.ismethod(factory):
        return factory.__func__, {"bound_to": factory.__self__}
    if inspect.isclass(factory) or inspect.isfunction(factory):
        return factory, None
    return type(factory), {"instance": getattr(factory, "__dict__", None) or repr(factory)}


def _module_file(module_name):
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    return Path(path).resolve() if path and Path(path).is_file() and str(path).endswith(".py") else None


def _code_files(code) -> set:
    """The file names the functions of ``code`` (a function, or a class's methods) were compiled
    from: a class exec'd in a module with a file claims that file, its methods do not."""
    functions = [code] if inspect.isfunction(code) else [
        v for v in vars(code).values() if inspect.isfunction(v)] if inspect.isclass(code) else []
    return {f.__code__.co_filename for f in functions}


def _source_root(module_name: str, path: Path) -> Path:
    """The directory the module was imported from (its sys.path entry)."""
    depth = 0 if module_name == "__main__" else module_name.count(".")
    if path.name == "__init__.py":
        depth += 1
    return path.parents[depth]


def _top_level(name: str, root: Path):
    """The files of top-level module or package ``name`` under ``root`` (empty if not there)."""
    if name in _NOT_FOLLOWED:
        return []
    package = root / name
    if (package / "__init__.py").is_file() or (package.is_dir() and any(package.glob("*.py"))):
        return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    module = root / f"{name}.py"
    return [module] if module.is_file() else []


def _imported_names(path: Path) -> set:
    """Top-level names of the absolute imports in ``path`` (read, not executed)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def source_files(module_name: str, path: Path) -> tuple:
    """(source root, sorted files) that the code of ``module_name`` (file ``path``) can reach in
    its source tree; :class:`UnhashablePolicy` if that tree is too large to be a policy's."""
    root = _source_root(module_name, path)
    top = module_name.partition(".")[0]
    files = set(_top_level(top, root)) if "." in module_name or path.name == "__init__.py" else set()
    files.add(path)
    todo, seen = list(files), set()
    while todo:
        current = todo.pop()
        for name in _imported_names(current) - seen:
            seen.add(name)
            found = [f for f in _top_level(name, root) if f not in files]
            files.update(found)
            todo.extend(found)
        if len(files) > MAX_FILES:
            raise UnhashablePolicy(f"module {module_name!r}: more than {MAX_FILES} source files reachable under "
                                   f"{root}; put the policy in a package of its own")
    files = sorted(files)
    if sum(f.stat().st_size for f in files) > MAX_BYTES:
        raise UnhashablePolicy(f"module {module_name!r}: its source tree under {root} exceeds "
                               f"{MAX_BYTES // 2 ** 20} MiB; put the policy in a package of its own")
    return root, files


def hash_source(factory, name) -> dict:
    """``{"source_file", "files": {path relative to the source root: sha256}, "source_sha256",
    "state_sha256"}`` of a user factory; :class:`UnhashablePolicy` (naming the policy and why) when
    its source is not on disk or its state cannot be pickled."""
    code, state = _code_and_state(factory)
    module_name = getattr(code, "__module__", None) or ""
    path = _module_file(module_name)
    if path is not None and any(not Path(f).is_file() or Path(f).resolve() != path for f in _code_files(code)):
        path = None  # compiled from elsewhere (a notebook cell, exec): the module's file is not its source
    if path is None:
        try:
            defined = inspect.getsourcefile(code)
        except (TypeError, OSError):
            defined = None
        where = f"{module_name!r}" + (f" (source {defined!r} is not a module file)" if defined else "")
        raise UnhashablePolicy(
            f"policy {name!r}: its code cannot be hashed: it is defined in module {where}, which has no source "
            "file (a notebook cell, exec'd or generated code), so results of edited code could not be told "
            "apart from stored ones. Move the policy into a module (a .py file, e.g. 'mypolicies.py', and "
            "name it 'mypolicies:Name'), or register it with study.register_policy(name, factory, "
            "allow_unhashable=True) to record it without a source hash")
    root, files = source_files(module_name, path)
    digests = {f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    total = hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(digests.items())).encode()).hexdigest()
    record = {"source_file": str(path), "files": digests, "source_sha256": total, "state_sha256": None}
    if state is not None:
        try:
            record["state_sha256"] = hashlib.sha256(pickle.dumps(state, protocol=4)).hexdigest()
        except Exception as exc:  # noqa: BLE001 -- any object that does not pickle
            raise UnhashablePolicy(
                f"policy {name!r}: the state of its factory ({type(factory).__name__}) cannot be hashed "
                f"({type(exc).__name__}: {exc}); make the factory a class or function, or register it with "
                "allow_unhashable=True") from None
    return record
