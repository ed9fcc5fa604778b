"""The study directory's writer lock: one writer per ``--out``.

:class:`study_lock` takes an exclusive POSIX lock (``fcntl.lockf``) on ``out/_study.lock`` for the
whole run: a second writer is refused with :class:`StudyLocked`, which names the holder recorded in
the file.  The kernel releases the lock when the holder dies, however it dies; on NFS the lock goes
through the server's lock manager (lockd/NLM, or NFSv4 state), which releases it when the client's
lease expires.
"""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from .errors import StorageError, StudyLocked

LOCK_NAME = "_study.lock"
_HELD: dict = {}  # lock path -> [fd, depth]: POSIX locks are per process, so never reopen a held one


def lock_path(out) -> Path:
    return Path(out) / LOCK_NAME


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
        self.path = lock_path(self.out).resolve() if self.out.exists() else lock_path(self.out)
        self.run_id = run_id
        self.argv = list(sys.argv if argv is None else argv)

    def __enter__(self):
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{self.out}: cannot create the output directory ({exc.strerror})") from None
        self.path = lock_path(self.out).resolve()
        key = str(self.path)
        if key in _HELD:
            _HELD[key][1] += 1
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot create the study lock ({exc.strerror}); is "
                               f"{self.out} writable?") from None
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
    return str(lock_path(out).resolve()) in _HELD
