"""Audit hooks on user policies (PEP 578): what a policy's own code may not do unless it says so.

In a process that runs a user policy (the forked process of a user-policy cell,
:mod:`study.runner.worker`; the runs of :func:`study.check_policy`) an audit hook refuses, with
:class:`PolicyRefused` (a ``PermissionError``) naming the policy, these calls made by the policy's
own code:

==========  ==================================================================================
need        what is refused without it
==========  ==================================================================================
files       opening a file for writing, creating, renaming, removing or changing files and
            directories (``open(..., "w")``, ``os.open`` with write flags, ``os.rename``,
            ``os.remove``, ``shutil.*``, ``sqlite3.connect``, ``tempfile.mkstemp`` ...)
processes   starting or signalling processes (``subprocess``, ``os.system``, ``os.exec*``,
            ``os.fork``, ``os.posix_spawn``, ``os.kill``)
sockets     creating, connecting or binding sockets, name lookups
frames      walking the interpreter's stack: ``sys._getframe`` (also through ``inspect`` and
            ``traceback``), ``sys._current_frames``, a traceback's or generator's frame,
            ``sys.settrace``/``sys.setprofile``
gc          ``gc.get_objects``, ``gc.get_referrers``, ``gc.get_referents``
threads     (no audit event: the kernel refuses new threads in a confined policy process)
==========  ==================================================================================

A policy that needs one declares it on its factory (the class, the function, a
``functools.partial``'s function, or a callable instance): ``policy_needs = ("files",)``; the
declaration is part of its provenance record (and so of the manifest).

*Whose call it is.*  A call is the policy's when, walking out from the call, the first frame that
is neither the standard library nor an installed third-party package is the policy's code (a file
of its package, or any code that is not :mod:`study`'s, the standard library's or an installed
package's: a script, a test module, a notebook cell).  So ``open(path, "w")``, ``numpy.save`` or
``pandas.DataFrame.to_csv`` called by the policy are its calls, while :mod:`study`'s own work
inside ``step.debiased()`` is not.  For the stack walks only the direct caller counts (through
``inspect`` and ``traceback``), so that the standard library's own uses -- ``namedtuple``,
``enum``, ``typing`` and ``logging`` call ``sys._getframe`` -- stay allowed.  The import system's
own writes (bytecode caches) are not refused.

*Limits.*  These hooks are the second line (clear messages for honest mistakes); the boundary is
the kernel's confinement of the policy's process (:mod:`study.policies.confine`,
:mod:`study.policies.sandbox`).  Audit hooks stop accidents and naive cheats, not a determined one: code that reaches
memory through :mod:`ctypes` (or a C extension of its own) can read or change anything in its
process, hooks included; and a hook sees only what CPython audits (reading files is allowed, and so
are monkey-patches of modules, which is why a user policy's cells run in processes of their own).
"""
from __future__ import annotations

import os
import site
import sys
import sysconfig
import threading
from pathlib import Path

NEEDS = {
    "files": "writing files",
    "processes": "starting or signalling processes",
    "sockets": "opening sockets",
    "frames": "walking the interpreter's stack",
    "gc": "walking the garbage collector's objects",
    "threads": "starting threads",  # refused by the kernel only (study.policies.confine): no audit event
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_FILE_EVENTS = {"os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.chmod", "os.chown",
                "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.mkfifo", "os.mknod", "os.removexattr",
                "os.setxattr", "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree",
                "shutil.move", "shutil.rmtree", "shutil.chown", "shutil.make_archive", "shutil.unpack_archive",
                "sqlite3.connect", "tempfile.mkstemp", "tempfile.mkdtemp", "dbm.open"}
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "os.startfile", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill"}
_SOCKET_EVENTS = {"socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                  "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
                  "socket.gethostbyname_ex"}
_FRAME_EVENTS = {"sys._getframe", "sys._getframemodulename", "sys._current_frames", "sys._current_exceptions",
                 "sys.settrace", "sys.setprofile"}
_FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
_GC_EVENTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}
EVENTS = {**dict.fromkeys(_FILE_EVENTS, "files"), **dict.fromkeys(_PROCESS_EVENTS, "processes"),
          **dict.fromkeys(_SOCKET_EVENTS, "sockets"), **dict.fromkeys(_FRAME_EVENTS, "frames"),
          **dict.fromkeys(_GC_EVENTS, "gc"), "open": "files", "object.__getattr__": "frames"}

_STUDY = str(Path(__file__).resolve().parents[1]) + os.sep
_THIS = str(Path(__file__).resolve())
_WALKERS = {str(Path(m).resolve()) for m in (sysconfig.get_paths()["stdlib"] + "/inspect.py",
                                             sysconfig.get_paths()["stdlib"] + "/traceback.py")}


def _prefixes(paths) -> tuple:
    found = set()
    for p in paths:
        if p:
            for form in (p, os.path.realpath(p)):
                found.add(form.rstrip(os.sep) + os.sep)
    return tuple(sorted(found, key=len, reverse=True))


_THIRD_PARTY = _prefixes([sysconfig.get_paths().get(k) for k in ("purelib", "platlib")]
                         + list(getattr(site, "getsitepackages", lambda: [])())
                         + [getattr(site, "getusersitepackages", lambda: "")()]
                         + [p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))])
_STDLIB = _prefixes([sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")])


class PolicyRefused(PermissionError):
    """A call a user policy made without declaring the need (module docstring)."""


def needs_of(factory) -> frozenset:
    """The needs a factory declares in ``policy_needs`` (on itself, a partial's function, an
    instance or its class); ValueError for a name that is not one of :data:`NEEDS`."""
    for holder in (factory, getattr(factory, "func", None), type(factory)):
        declared = getattr(holder, "policy_needs", None) if holder is not None else None
        if declared is not None:
            if isinstance(declared, str) or not all(isinstance(n, str) for n in declared):
                raise ValueError(f"policy_needs must be a tuple of names from {sorted(NEEDS)}, got {declared!r}")
            unknown = sorted(set(declared) - set(NEEDS))
            if unknown:
                raise ValueError(f"policy_needs names {unknown}, not among {sorted(NEEDS)}")
            return frozenset(declared)
    return frozenset()


def policy_roots(module_name) -> tuple:
    """Directories (or the file) of the top-level package of ``module_name``, found without
    importing it: code there is the policy's even where it is installed as a package."""
    if not module_name or module_name in ("__main__", "builtins"):
        return ()
    import importlib.util
    try:
        spec = importlib.util.find_spec(module_name.partition(".")[0])
    except (ImportError, ValueError):
        return ()
    if spec is None:
        return ()
    places = list(spec.submodule_search_locations or ()) or ([os.path.dirname(spec.origin)] if spec.origin and
                                                                 spec.origin.endswith("__init__.py") else
                                                                 [spec.origin] if spec.origin else [])
    return tuple(os.path.realpath(p) for p in places if p and os.path.exists(p))


class _Kind:
    """What a code file is: this module, study's, a walker of the stack, the standard library's,
    an installed package's, the import system's, or the policy's (anything else)."""

    def __init__(self, roots=()):
        self.roots = tuple(r.rstrip(os.sep) for r in roots)
        self.cache: dict = {}

    def __call__(self, filename: str) -> str:
        kind = self.cache.get(filename)
        if kind is None:
            kind = self.cache[filename] = self._classify(filename)
        return kind

    def _classify(self, filename: str) -> str:
        if filename.startswith("<frozen importlib"):
            return "import"
        if filename.startswith("<frozen"):
            return "stdlib"
        if filename.startswith("<"):  # exec'd code, a notebook cell: not the library's
            return "policy"
        path = os.path.realpath(filename)
        if any(path == r or path.startswith(r + os.sep) for r in self.roots):
            return "policy"
        if path == _THIS:
            return "hook"
        if path.startswith(_STUDY) or filename.startswith(_STUDY):
            return "study"
        if path in _WALKERS:
            return "walker"
        if path.startswith(_THIRD_PARTY) or filename.startswith(_THIRD_PARTY):
            return "third"
        if path.startswith(_STDLIB) or filename.startswith(_STDLIB):
            return "stdlib"
        return "policy"


def _writes(event: str, args) -> bool:
    if event != "open":
        return True
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return True
    return isinstance(mode, str) and any(c in mode for c in "wax+")


class Watch:
    """One policy watched: its name, where its code lives, what it declared, what was refused."""

    def __init__(self, name: str, roots=(), needs=frozenset(), on_refusal=None):
        self.name, self.needs, self.on_refusal = str(name), frozenset(needs), on_refusal
        self.kind = _Kind(roots)
        self.refusals: list = []

    def culprit(self, frame, need: str):
        """The frame (file, line) that makes the call the policy's, or None."""
        kind = self.kind
        if need == "frames":  # the direct caller, through the stack walkers of the standard library
            while frame is not None and kind(frame.f_code.co_filename) in ("hook", "walker"):
                frame = frame.f_back
            return frame if frame is not None and kind(frame.f_code.co_filename) == "policy" else None
        while frame is not None:
            k = kind(frame.f_code.co_filename)
            if k == "import":  # the import system's own work (bytecode caches)
                return None
            if k in ("study", "policy"):
                return frame if k == "policy" else None
            frame = frame.f_back
        return None

    def check(self, event: str, args) -> None:
        need = EVENTS.get(event)
        if need is None or need in self.needs:
            return
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in _FRAME_ATTRIBUTES):
            return
        if need == "files" and not _writes(event, args):
            return
        frame = _caller()
        culprit = self.culprit(frame, need)
        if culprit is None:
            return
        what = args[0] if event in ("open", "os.rename", "os.remove", "os.mkdir", "shutil.rmtree") and args else ""
        shown = f" {what!r}" if isinstance(what, (str, bytes)) and what else ""
        message = (f"policy {self.name!r} is not allowed {NEEDS[need]} ({event}{shown} at "
                   f"{culprit.f_code.co_filename}:{culprit.f_lineno}): refused by the audit hook of user policies; "
                   f"a policy that needs it declares policy_needs = ({need!r},) on its factory (docs/baselines.md)")
        self.refusals.append(message)
        if self.on_refusal is not None:
            self.on_refusal(need, message)
        raise PolicyRefused(message)


_getframe = sys._getframe  # bound before any policy could replace sys._getframe
_local = threading.local()


def _caller():
    """The frame that raised the audit event (outside this module); None from C code alone."""
    try:
        frame = _getframe(2)
    except ValueError:  # no Python frame above the hook
        return None
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame


_ACTIVE: list = []  # the watch of the current check_policy call (switched on and off)
_INSTALLED: list = []


def _make_hook(permanent):
    active = _ACTIVE

    def hook(event, args):
        watch = permanent if permanent is not None else (active[-1] if active else None)
        if watch is None or event not in EVENTS or getattr(_local, "busy", False):
            return
        _local.busy = True  # the hook's own frame walk raises sys._getframe again
        try:
            watch.check(event, args)
        finally:
            _local.busy = False

    return hook


def install_for_process(watch: Watch) -> None:
    """Watch ``watch``'s policy for the rest of this process (a process that runs a user policy):
    there is no switch to turn it off."""
    sys.dont_write_bytecode = True  # no bytecode caches written from this process
    sys.addaudithook(_make_hook(watch))


def _ensure_switchable() -> None:
    if not _INSTALLED:
        sys.addaudithook(_make_hook(None))
        _INSTALLED.append(True)


class watching:
    """``with watching(watch):`` the calls the watched policy makes inside are checked (the hook is
    installed once per process and does nothing outside such a block)."""

    def __init__(self, watch: Watch):
        self.watch = watch

    def __enter__(self):
        _ensure_switchable()
        _ACTIVE.append(self.watch)
        return self.watch

    def __exit__(self, *exc):
        _ACTIVE.pop()
        return False


def watch_for(name, factory=None, on_refusal=None) -> Watch:
    """A :class:`Watch` of policy ``name`` (its factory, when resolved, gives its code's place and
    its declared needs; an import path gives the place without importing it)."""
    module = getattr(getattr(factory, "func", factory), "__module__", None) if factory is not None else None
    if module is None and isinstance(name, str) and ":" in name:
        module = name.partition(":")[0]
    needs = needs_of(factory) if factory is not None else frozenset()
    return Watch(name, policy_roots(module), needs, on_refusal)
