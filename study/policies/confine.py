"""Kernel confinement of a user policy's process: Landlock (the file system) and seccomp (system
calls), applied in the policy's process before any of its code is imported, irreversibly (for
that process and anything it could start).

=================  ==========================================================================
rule               what the kernel refuses (``PermissionError``/``OSError`` in the policy)
=================  ==========================================================================
writes             creating, writing, truncating, renaming or removing any file or directory
                   outside the process's private scratch directory (Landlock; native code
                   included: pyarrow, ``numpy.tofile``, ``mmap``, ``ctypes`` calls into libc)
reads              reading anything but the interpreter, the installed packages, the
                   directories on ``sys.path``, ``/usr``, ``/lib*``, ``/etc`` and the scratch
                   directory; never the study's output directory, even beneath those
processes         ``fork``, ``vfork``, ``clone`` of a process, ``execve``/``execveat`` (every
                   route: ``subprocess``, ``os.fork``, ``_posixsubprocess.fork_exec``,
                   ``os.posix_spawn``, ``multiprocessing``); new threads too
sockets           ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``
others            signalling or tracing another process (``kill``, ``tgkill``, ``ptrace``,
                   ``process_vm_*``, ``pidfd_*``), ``io_uring`` (it bypasses system-call
                   filters), mounts, namespaces, kernel modules, BPF, ``open_by_handle_at``,
                   ``TIOCSTI``
=================  ==========================================================================

Where ``status()["refusals_reported"]`` (libseccomp's API level 5 or more, an architecture of
:mod:`study.policies.refusals`), each refused system call is referred to a listener held by the
trusted side, which records it and answers ``EPERM``: a policy that catches the refusal and goes on
still fails its replication, named (``PolicyRefused: the kernel refused socket ...``).  Landlock's
refusals (``EACCES``) leave no such trace: one the policy catches goes unreported.

A need the policy declares (``policy_needs``, :mod:`study.policies.hooks`) lifts the matching
kernel rule too: ``"files"`` every file-system rule, ``"processes"`` the process and signal rules,
``"sockets"`` the socket rules, ``"threads"`` new threads only; the manifest records the needs.

Bindings: ``landlock`` (PyPI; a ctypes binding of the three Landlock system calls, no compiled
code) and ``pyseccomp`` (PyPI; a ctypes binding of libseccomp, the C library behind systemd's
and the container runtimes' filters).  :func:`status` says what this machine offers; where
either is missing user policies run only with ``--trust-policy-code``.
"""
from __future__ import annotations

import errno
import os
import sys

READ_ROOTS = ("/usr", "/lib", "/lib64", "/lib32", "/etc", "/bin", "/sbin")
# linux/sched.h, asm-generic/ioctls.h
_CLONE_THREAD = 0x00010000
_TIOCSTI = 0x5412
_PROCESS_CALLS = ("fork", "vfork", "execve", "execveat")
_SOCKET_CALLS = ("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4")
_ALWAYS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd", "pidfd_send_signal",
           "io_uring_setup", "io_uring_enter", "io_uring_register", "mount", "umount2", "unshare", "setns",
           "pivot_root", "chroot", "init_module", "finit_module", "delete_module", "kexec_load", "bpf",
           "perf_event_open", "open_by_handle_at", "name_to_handle_at", "userfaultfd", "keyctl", "add_key",
           "request_key", "reboot", "swapon", "swapoff", "fanotify_init", "move_mount", "open_tree", "fsopen",
           "fsmount", "fspick", "mount_setattr", "kcmp")
_SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_FOUND: list = []  # status(), once per process (the bindings' imports run ldconfig)
_PREPARED: list = []  # prepare() ran here: the BLAS libraries found (a threadpoolctl controller)


class ConfinementUnavailable(RuntimeError):
    """This machine cannot confine a policy's process (no Landlock, no seccomp, not Linux)."""


def asker_path() -> list:
    """This process's ``sys.path`` for a confined child, relative entries (``""`` is the working
    directory) made absolute: the child works in its scratch directory, where they would name
    other folders (a user's ``examples`` package next to the working directory, found no more)."""
    return [p if os.path.isabs(p) else os.path.abspath(p) for p in sys.path]


def status() -> dict:
    """What this machine offers: ``{"landlock_abi": int or None, "seccomp": str or None (the
    libseccomp version), "available": bool, "reason": str}`` (found once per process)."""
    if not _FOUND:
        _FOUND.append(_status())
    return dict(_FOUND[0])


def prepare() -> None:
    """In a process that forks policy processes, before the first fork: import the bindings, find
    what the machine offers and find the BLAS libraries, so that each forked child's
    :func:`confine` does none of it again (about 30 ms of a child's start, ``ldconfig`` included)."""
    if not status()["available"]:
        return
    from landlock import FSAccess, Ruleset
    from threadpoolctl import ThreadpoolController
    controller = ThreadpoolController()
    warm = Ruleset()  # the bindings' first calls (ctypes look-ups, flag combinations), never applied
    try:
        warm.allow(sys.prefix, rules=FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE)
        warm.allow(os.devnull, rules=FSAccess.READ_FILE | FSAccess.WRITE_FILE)
        warm.allow(sys.executable, rules=FSAccess.READ_FILE | FSAccess.EXECUTE)
    finally:
        os.close(warm._fd)
    _filter(frozenset(), status()["refusals_reported"])  # built, never loaded
    _PREPARED.append(controller)


def _status() -> dict:
    abi, seccomp, reasons = None, None, []
    if not sys.platform.startswith("linux"):
        reasons.append(f"not Linux ({sys.platform})")
    else:
        try:
            import landlock
            abi = int(landlock.landlock_abi_version())
        except Exception as exc:  # noqa: BLE001 -- the package or the kernel lacks it: named
            reasons.append(f"no Landlock ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        try:
            import pyseccomp
            seccomp = ".".join(str(v) for v in _libseccomp_version(pyseccomp))
        except Exception as exc:  # noqa: BLE001
            reasons.append(f"no seccomp (pyseccomp/libseccomp: {type(exc).__name__}: {exc})")
    ok = abi is not None and abi >= 1 and seccomp is not None
    reported = False
    if ok:
        from . import refusals
        import pyseccomp
        reported = refusals.supported() and pyseccomp.get_api() >= 5  # level 5: user notification
    return {"landlock_abi": abi, "seccomp": seccomp, "available": ok, "reason": "; ".join(reasons),
            "refusals_reported": reported}


def _libseccomp_version(pyseccomp) -> tuple:
    lib = getattr(pyseccomp, "_lsc", None) or getattr(pyseccomp, "_libseccomp", None)
    if lib is not None and hasattr(lib, "seccomp_version"):
        import ctypes

        class _Version(ctypes.Structure):
            _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]
        lib.seccomp_version.restype = ctypes.POINTER(_Version)
        v = lib.seccomp_version().contents
        return v.major, v.minor, v.micro
    pyseccomp.get_api()  # loads the library: raises where it is missing
    return ("api", pyseccomp.get_api())


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def readable_roots(hidden=(), extra=()) -> list:
    """The trees a confined policy may read: :data:`READ_ROOTS`, the interpreter's prefixes and the
    directories of ``sys.path`` (and ``extra``), with every path of ``hidden`` (the study's output
    directory) cut out: a root holding one is replaced by its entries, down to the hidden one,
    which is left out."""
    roots = [*READ_ROOTS, sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path, *extra]
    roots = sorted({os.path.realpath(r) for r in roots if r and os.path.exists(r)})
    hidden = [os.path.realpath(h) for h in hidden if h]
    kept = [r for r in roots if not any(_beneath(r, k) and r != k for k in roots)]  # the outermost only
    out = []
    for root in kept:
        out.extend(_cut(root, [h for h in hidden if _beneath(h, root)], hidden))
    return out


def _cut(root: str, hidden: list, every: list) -> list:
    """``root``'s readable pieces: itself if it holds nothing of ``hidden``, else its entries cut in
    turn.  An entry that is a symbolic link is granted only if its target neither holds nor lies in
    a path of ``every``: Landlock grants what a rule's path resolves to, so a link to the output
    directory (or to a folder above it, as pytest's ``*current`` links are) would grant it whole."""
    if os.path.islink(root):
        real = os.path.realpath(root)
        return [] if any(_beneath(h, real) or _beneath(real, h) for h in every) else [root]
    if not hidden:
        return [root]
    if any(h == root for h in hidden):
        return []
    if not os.path.isdir(root):
        return [root]
    out = []
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    for name in entries:
        path = os.path.join(root, name)
        out.extend(_cut(path, [h for h in hidden if _beneath(h, path)], every))
    return out


def confine(scratch: str, needs=frozenset(), hidden=(), extra_reads=(), report=False) -> dict:
    """Confine this process for good (module docstring); returns what was applied.  Raises
    :class:`ConfinementUnavailable` where the machine cannot (nothing is applied then).

    With ``report`` (where ``status()["refusals_reported"]``), each refused system call is referred
    to a listener instead of failing at once, and the returned ``"listener"`` is its descriptor:
    the caller hands it to the trusted side and closes it before any of the policy's code runs, or
    the process's refused calls wait forever (:mod:`study.policies.refusals`)."""
    found = status()
    if not found["available"]:
        raise ConfinementUnavailable(found["reason"] or "kernel confinement is unavailable here")
    if "threads" not in needs and "processes" not in needs:  # BLAS would start threads, refused, and fail
        if _PREPARED:  # the libraries found before the fork (OpenBLAS sets its threads up again in each child)
            _PREPARED[0].limit(limits=1)
        else:
            from threadpoolctl import threadpool_limits
            threadpool_limits(1)
    _landlock(scratch, needs, hidden, extra_reads)
    listener = _seccomp(needs, report and found["refusals_reported"])
    return {"landlock_abi": found["landlock_abi"], "seccomp": found["seccomp"], "lifted": sorted(set(needs)),
            "listener": listener}


def _landlock(scratch: str, needs, hidden, extra_reads) -> None:
    from landlock import FSAccess, Ruleset
    rules = Ruleset()  # handles every file-system right this kernel's ABI knows
    if "files" in needs:
        rules.allow("/")
    else:
        read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
        for root in readable_roots(hidden, extra_reads):
            try:
                rules.allow(root, rules=read if os.path.isdir(root) else FSAccess.READ_FILE | FSAccess.EXECUTE)
            except OSError:  # gone since it was listed, or a special file: not readable then
                pass
        for device in ("/dev/null", "/dev/urandom", "/dev/zero"):
            if os.path.exists(device):
                rules.allow(device, rules=FSAccess.READ_FILE | FSAccess.WRITE_FILE)
        rules.allow(scratch)
    rules.apply()
    os.close(rules._fd)  # the ruleset's descriptor is not needed once applied


def _seccomp(needs, report=False):
    """Load the filter; with ``report``, its listener's descriptor (else None)."""
    f = _filter(needs, report)
    f.load()
    if not report:
        return None
    import pyseccomp as sc
    fd = sc._libseccomp.seccomp_notify_fd(f._filter)  # pyseccomp has no public accessor for it
    if fd < 0:
        raise OSError(-fd, "seccomp: no listener for the loaded filter")
    return fd


def _filter(needs, report=False):
    import pyseccomp as sc
    refuse = sc.NOTIFY if report else sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)

    def deny(name, *args, action=refuse):
        try:
            f.add_rule(action, name, *args)
        except (OSError, ValueError, RuntimeError):  # a call this architecture does not have
            pass

    for name in _ALWAYS:
        deny(name)
    deny("ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI))
    if "processes" not in needs:
        for name in _PROCESS_CALLS:
            deny(name)
        deny("clone3", action=sc.ERRNO(errno.ENOSYS))  # glibc then falls back to clone, whose flags are seen
        if "threads" in needs:
            deny("clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
        else:
            deny("clone")
        pid = os.getpid()
        for name in _SIGNALS:  # only to itself
            deny(name, sc.Arg(0, sc.NE, pid))
    if "sockets" not in needs:
        for name in _SOCKET_CALLS:
            deny(name)
    return f


def scratch_dir() -> str:
    """A new private directory (0700) for one policy process."""
    import tempfile
    return tempfile.mkdtemp(prefix="study-policy-")


def remove_scratch(path) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["ConfinementUnavailable", "confine", "readable_roots", "status", "scratch_dir", "remove_scratch"]
