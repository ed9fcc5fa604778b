"""Where a user policy's behaviour comes from, hashed so that stored results are never mixed with
results of edited code, other parameters or other data.

The hash of a policy covers:

* **its code**: the module that defines the factory; **every file** of its top-level package when
  it lies in one (data files such as ``params.json`` included, not only ``.py``; hidden files,
  ``__pycache__`` and compiled ``.pyc`` excepted); and, followed through their ``import`` statements
  and ``importlib.import_module("name")`` / ``__import__("name")`` calls with a literal name (read,
  not executed), the other modules and packages of the same source root (the ``sys.path`` entry the
  module was imported from).  Installed libraries, the standard library and :mod:`study` itself
  (covered by the core source hash) are not followed.
* **its parameters**: the values a factory closes over (closure cells, defaults), the arguments of
  a ``functools.partial``, the attributes of a callable instance or of the object a bound method
  belongs to, each hashed by value (recursively: a closure inside a closure, an array's bytes, a
  local class's code), so that ``make_factory(10)`` and ``make_factory(20)`` differ.
* **its declared inputs**: a factory (or its class) may list what else it reads in
  ``policy_inputs``: paths (relative to the factory's module directory; a directory stands for
  every file under it) and environment variables written ``"$NAME"`` (their value is hashed, never
  stored).

What cannot be hashed is said so: a factory without source on disk (a notebook cell, ``exec``'d
code) raises :class:`UnhashablePolicy` unless the user opted in
(``study.register_policy(..., allow_unhashable=True)``); a parameter that is neither a plain value,
a container, an array, code nor an object with attributes, and does not pickle, raises it too.
Not seen at all: a module imported under a computed name, data read from outside the package or
from the network, an environment variable, unless declared in ``policy_inputs``
(docs/baselines.md, "Provenance").
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import os
import pickle
import sys
import types
from pathlib import Path

import numpy as np

MAX_FILES = 2000  # a "package" larger than this is not the user's policy code
MAX_BYTES = 64 * 2 ** 20
MAX_DEPTH = 24  # nesting of a factory's parameters followed
_NOT_FOLLOWED = {"study"}
_IMPORT_CALLS = {"import_module", "__import__"}
UNSET = "<unset>"
MISSING = "<missing>"


class UnhashablePolicy(ValueError):
    """A user policy whose source, parameters or inputs cannot be hashed (so results of edited code
    could not be told apart)."""


# --- parameters ----------------------------------------------------------------------------------

def _importable(obj) -> bool:
    """Can ``obj`` (a class or function) be found again by module and qualified name (so that its
    code is covered by its file's hash)?"""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    return bool(module) and module != "__main__" and "<" not in qualname


def _code_bytes(code: types.CodeType, seen, depth) -> bytes:
    """A code object by what it computes: bytecode, constants (nested code too), names."""
    consts = b"".join(_code_bytes(c, seen, depth + 1) if isinstance(c, types.CodeType) else _encode(c, seen, depth + 1)
                      for c in code.co_consts)
    return b"code(" + code.co_code + b"|" + consts + b"|" + repr((code.co_names, code.co_varnames,
                                                                   code.co_freevars)).encode() + b")"


def _encode(value, seen: set, depth: int = 0) -> bytes:
    """Canonical bytes of a parameter's value (:class:`UnhashablePolicy` when it has none)."""
    if depth > MAX_DEPTH:
        raise UnhashablePolicy(f"nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr((type(value).__name__, value)).encode()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return b"objarray" + repr(value.shape).encode() + _encode(value.tolist(), seen, depth + 1)
        return b"ndarray" + repr((value.dtype.str, value.shape)).encode() + np.ascontiguousarray(value).tobytes()
    if isinstance(value, np.generic):
        return repr((type(value).__name__, value.item())).encode()
    if isinstance(value, types.ModuleType):
        return b"module:" + value.__name__.encode()
    if id(value) in seen:
        return b"cycle"
    seen = seen | {id(value)}
    if isinstance(value, (list, tuple)):
        return type(value).__name__.encode() + b"(" + b",".join(_encode(v, seen, depth + 1) for v in value) + b")"
    if isinstance(value, (set, frozenset)):
        return b"set(" + b",".join(sorted(_encode(v, seen, depth + 1) for v in value)) + b")"
    if isinstance(value, dict):
        items = sorted(_encode(k, seen, depth + 1) + b":" + _encode(v, seen, depth + 1) for k, v in value.items())
        return b"dict(" + b",".join(items) + b")"
    if isinstance(value, functools.partial):
        return b"partial(" + _encode((value.func, value.args, value.keywords), seen, depth + 1) + b")"
    if isinstance(value, types.MethodType):
        return b"method(" + _encode((value.__func__, value.__self__), seen, depth + 1) + b")"
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)) and _importable(value):
        return f"ref:{value.__module__}:{value.__qualname__}".encode()  # its code is in its file's hash
    if isinstance(value, types.FunctionType):  # a lambda or a local function: its code and what it closes over
        cells = tuple(c.cell_contents if _filled(c) else UNSET for c in value.__closure__ or ())
        return b"function(" + _code_bytes(value.__code__, seen, depth) + _encode(
            (value.__defaults__, value.__kwdefaults__, cells), seen, depth + 1) + b")"
    if isinstance(value, type):  # a local class: its methods' code and its attributes
        own = {k: v for k, v in vars(value).items() if k not in ("__dict__", "__weakref__", "__doc__", "__module__")}
        return b"class(" + value.__qualname__.encode() + _encode(own, seen, depth + 1) + b")"
    if isinstance(value, (staticmethod, classmethod, property)):
        return b"descriptor(" + _encode(getattr(value, "__func__", None) or value.fget, seen, depth + 1) + b")"
    attributes = _attributes(value)
    if attributes is not None:
        return b"object(" + _encode((type(value), attributes), seen, depth + 1) + b")"
    try:
        return b"pickle:" + pickle.dumps(value, protocol=4)
    except Exception as exc:  # noqa: BLE001 -- any object that does not pickle
        raise UnhashablePolicy(f"a {type(value).__name__} ({type(exc).__name__}: {exc})") from None


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return False
    return True


def _attributes(obj) -> dict | None:
    """An object's fields (a dataclass's), else its ``__dict__`` and slots; None when it has none."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    found = dict(getattr(obj, "__dict__", {}) or {})
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found[name] = getattr(obj, name)
    if not found and not hasattr(obj, "__dict__") and not any(getattr(c, "__slots__", ()) for c in type(obj).__mro__):
        return None
    return found


def _parameters(factory) -> dict:
    """{label: value} of what parametrises ``factory`` beyond its code."""
    if isinstance(factory, functools.partial):
        found = {f"partial.args[{k}]": v for k, v in enumerate(factory.args)}
        found.update({f"partial.keywords[{k!r}]": v for k, v in factory.keywords.items()})
        found.update({f"partial.func {label}": v for label, v in _parameters(factory.func).items()})
        return found
    if inspect.ismethod(factory):
        attributes = _attributes(factory.__self__)
        if attributes is None:
            return {"bound to": factory.__self__}
        return {f"bound to .{k}": v for k, v in attributes.items()}
    if inspect.isfunction(factory):
        code = factory.__code__
        found = {f"closure {name!r}": cell.cell_contents if _filled(cell) else UNSET
                 for name, cell in zip(code.co_freevars, factory.__closure__ or ())}
        positional = code.co_varnames[:code.co_argcount]
        for name, value in zip(positional[len(positional) - len(factory.__defaults__ or ()):], factory.__defaults__ or ()):
            found[f"default {name!r}"] = value
        found.update({f"default {k!r}": v for k, v in (factory.__kwdefaults__ or {}).items()})
        return found
    if inspect.isclass(factory):
        return {}
    attributes = _attributes(factory)
    return {f"instance.{k}": v for k, v in attributes.items()} if attributes is not None else {"instance": factory}


def parameter_digests(factory, name) -> dict:
    """{label: SHA-256} of each parameter of ``factory`` (closure cells, defaults, partial
    arguments, instance attributes); :class:`UnhashablePolicy` naming the one that cannot be hashed."""
    digests = {}
    for label, value in _parameters(factory).items():
        try:
            digests[label] = hashlib.sha256(_encode(value, set())).hexdigest()
        except UnhashablePolicy as exc:
            raise UnhashablePolicy(
                f"policy {name!r}: its factory's parameter {label} cannot be hashed ({exc}); make it a plain value, "
                "or register the policy with allow_unhashable=True") from None
    return digests


# --- code ----------------------------------------------------------------------------------------

def _code_and_module(factory):
    """The class or function whose source defines ``factory``."""
    if isinstance(factory, functools.partial):
        return _code_and_module(factory.func)
    if inspect.ismethod(factory):
        return factory.__func__
    if inspect.isclass(factory) or inspect.isfunction(factory):
        return factory
    return type(factory)


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


def _hashed(path: Path, top: Path) -> bool:
    """Is ``path`` (under ``top``) part of what is hashed: not hidden, not in ``__pycache__``, not compiled?"""
    parts = path.relative_to(top).parts
    return (path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in parts)
            and path.suffix not in (".pyc", ".pyo"))


def tree_files(top: Path) -> list:
    """Every hashed file under directory ``top``, sorted; :class:`UnhashablePolicy` past :data:`MAX_FILES`."""
    found = []
    for path in top.rglob("*"):
        if _hashed(path, top):
            found.append(path)
            if len(found) > MAX_FILES:
                raise UnhashablePolicy(f"{top} holds more than {MAX_FILES} files; put the policy in a package of its own")
    return sorted(found)


def _top_level(name: str, root: Path):
    """The files of top-level module or package ``name`` under ``root`` (empty if not there): every
    file of a package, the one file of a module."""
    if name in _NOT_FOLLOWED:
        return []
    package = root / name
    if (package / "__init__.py").is_file() or (package.is_dir() and any(package.glob("*.py"))):
        return tree_files(package)
    module = root / f"{name}.py"
    return [module] if module.is_file() else []


def _imported_names(path: Path) -> set:
    """Top-level names of the absolute imports in ``path``, and of ``import_module("a.b")`` /
    ``__import__("a")`` calls with a literal name (read, not executed)."""
    if path.suffix != ".py":
        return set()
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
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith("."):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in _IMPORT_CALLS:
                names.add(node.args[0].value.partition(".")[0])
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


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- declared inputs -----------------------------------------------------------------------------

def declared_inputs(factory) -> tuple:
    """The ``policy_inputs`` a factory declares (on itself, a partial's function, an instance or
    its class): a tuple of strings."""
    for holder in (factory, getattr(factory, "func", None), type(factory)):
        inputs = getattr(holder, "policy_inputs", None) if holder is not None else None
        if inputs is not None:
            if isinstance(inputs, (str, os.PathLike)) or not all(isinstance(i, (str, os.PathLike)) for i in inputs):
                raise UnhashablePolicy(f"policy_inputs must be a list of paths and '$NAME' environment variables, "
                                       f"got {inputs!r}")
            return tuple(str(i) for i in inputs)
    return ()


def input_digests(inputs, directory: Path, name) -> dict:
    """{input: SHA-256} of declared inputs: each file (a directory: each file under it, keyed by
    its path), each ``$NAME`` environment variable's value (:data:`UNSET` when unset); a path
    that does not exist is :data:`MISSING` (its appearance changes the hash)."""
    digests, total = {}, 0
    for item in inputs:
        if item.startswith("$"):
            value = os.environ.get(item[1:])
            digests[item] = UNSET if value is None else hashlib.sha256(value.encode()).hexdigest()
            continue
        path = Path(item).expanduser()
        path = path if path.is_absolute() else directory / path
        if path.is_dir():
            for f in tree_files(path):
                digests[f"{item.rstrip('/')}/{f.relative_to(path).as_posix()}"] = _file_digest(f)
                total += f.stat().st_size
        elif path.is_file():
            digests[item] = _file_digest(path)
            total += path.stat().st_size
        else:
            digests[item] = MISSING
        if total > MAX_BYTES:
            raise UnhashablePolicy(f"policy {name!r}: its declared inputs exceed {MAX_BYTES // 2 ** 20} MiB")
    return digests


def _combined(digests: dict | None) -> str | None:
    if not digests:
        return None
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(digests.items())).encode()).hexdigest()


def hash_source(factory, name) -> dict:
    """``{"source_file", "files": {path relative to the source root: sha256}, "source_sha256",
    "state": {parameter: sha256} or None, "state_sha256", "inputs": {input: sha256} or None,
    "inputs_sha256"}`` of a user factory; :class:`UnhashablePolicy` (naming the policy and why)
    when its source is not on disk or a parameter or input cannot be hashed."""
    code = _code_and_module(factory)
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
    return hash_located(module_name, path, parameter_digests(factory, name), declared_inputs(factory), name)


def hash_located(module_name: str, path: Path, state: dict, inputs, name) -> dict:
    """:func:`hash_source`'s record from the module's name and file, the parameters' digests and
    the declared inputs (the files are read and hashed, never run)."""
    root, files = source_files(module_name, path)
    digests = {f.relative_to(root).as_posix(): _file_digest(f) for f in files}
    inputs = input_digests(inputs, path.parent, name)
    return {"source_file": str(path), "files": digests, "source_sha256": _combined(digests),
            "state": state or None, "state_sha256": _combined(state), "inputs": inputs or None,
            "inputs_sha256": _combined(inputs)}


def description(method, factory) -> dict:
    """In a confined process: what the trusted side needs of an import path's factory
    (:func:`study.policies.registry.describe_import_path`), as JSON-able values."""
    from .hooks import needs_of
    code = _code_and_module(factory)
    target = getattr(factory, "func", factory)
    module = getattr(code, "__module__", None) or ""
    return {"module": module, "file": getattr(sys.modules.get(module), "__file__", None),
            "code_files": sorted(_code_files(code)), "import_module": getattr(target, "__module__", None),
            "import_qualname": getattr(target, "__qualname__", None), "needs": sorted(needs_of(factory)),
            "inputs": list(declared_inputs(factory)), "state": parameter_digests(factory, method)}
