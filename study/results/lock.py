"""The study directory's writer lock: one writer per ``--out``.

:class:`study_lock` takes an exclusive POSIX lock (``fcntl.lockf``) on ``out/_study.lock`` for the
whole run: a second writer is refused with :class:`StudyLocked`, which names the holder recorded in
the file.  The kernel releases the lock when the holder dies, however it dies; on NFS the lock goes
through the server's lock manager (lockd/NLM, or NFSv4 state), which releases it when the client's
lease expires.

The lock file is opened with ``O_NOFOLLOW`` and must be a regular file with a single link: a
symbolic or hard link planted as ``_study.lock`` is refused (:class:`PlantedLink`, naming it)
before anything is written, so the lock never truncates a file elsewhere.
"""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

from .errors import PlantedLink, StorageError, StudyLocked

LOCK_NAME = "_study.lock"
_HELD: dict = {}  # lock path -> [fd, depth]: POSIX locks are per process, so never reopen a held one


def lock_path(out) -> Path:
    return Path(out) / LOCK_NAME


def _held_key(out) -> str:
    """The key of a held lock: the resolved directory (``--out`` may be a link) and the lock's own
    name, never resolved (it is never followed)."""
    return str(Path(out).resolve() / LOCK_NAME)


def _refuse_planted(path: Path, why: str):
    raise PlantedLink(f"{path} is {why}; the study lock is never followed or shared (a planted link would make "
                      "this run truncate another file): remove it and rerun")


def _open_lock_file(path: Path, out: Path) -> int:
    """A descriptor of the lock file, created if missing; never through a link."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            try:
                target = f" (to {os.readlink(path)})"
            except OSError:
                target = ""
            _refuse_planted(path, f"a symbolic link{target}")
        raise StorageError(f"{path}: cannot create the study lock ({exc.strerror}); is "
                           f"{out} writable?") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        _refuse_planted(path, "not a regular file" if not stat.S_ISREG(st.st_mode) else
                        f"a hard link ({st.st_nlink} names share its contents)")
    return fd


def describe_holder(path: Path) -> str:
    """What the lock file says about its holder (read by a process that does NOT hold the lock)."""
    info = {}
    for _ in range(20):  # the holder writes its record right after locking: allow it a moment
        try:
            info = json.loads(Path(path).read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if info:
            break
        time.sleep(0.05)
    if not info:
        return "another process (it has not recorded itself yet)"
    argv = " ".join(str(a) for a in info.get("argv") or [])
    return (f"run {info.get('run_id')} (pid {info.get('pid')} on host {info.get('host')}, started "
            f"{info.get('started')}: {argv})")


class study_lock:
    """Hold the exclusive writer lock of study directory ``out`` (re-entrant within a process).

    Raises :class:`StudyLocked` naming the holder if another process holds it, and
    :class:`StorageError` if ``out`` cannot be created or written."""

    def __init__(self, out, run_id: str = "", argv=None):
        self.out = Path(out)
        self.path = Path(_held_key(self.out)) if self.out.exists() else lock_path(self.out)
        self.run_id = run_id
        self.argv = list(sys.argv if argv is None else argv)

    def __enter__(self):
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{self.out}: cannot create the output directory ({exc.strerror})") from None
        key = _held_key(self.out)
        self.path = Path(key)
        if key in _HELD:
            _HELD[key][1] += 1
            return self
        fd = _open_lock_file(self.path, self.out)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise StudyLocked(f"{self.out} is in use by {describe_holder(self.path)}; one writer per "
                                  "study directory: wait for it to finish, or choose another --out") from None
            raise StorageError(f"{self.path}: cannot lock ({exc.strerror}); the filesystem may not "
                               "support POSIX locks") from None
        info = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": self.run_id,
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "argv": self.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        os.fsync(fd)
        _HELD[key] = [fd, 1]
        return self

    def __exit__(self, *exc):
        key = str(self.path)
        held = _HELD.get(key)
        if held is None:
            return False
        held[1] -= 1
        if held[1] == 0:
            del _HELD[key]
            try:
                os.ftruncate(held[0], 0)
            except OSError:
                pass
            os.close(held[0])  # releases the lock
        return False


def holds_lock(out) -> bool:
    return _held_key(out) in _HELD
