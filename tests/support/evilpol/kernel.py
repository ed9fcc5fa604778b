"""Contestants that attack the boundary itself (the kernel's confinement and the channel), for
tests/runner/test_confinement.py.  Each is registered there with ``functools.partial`` and
``target``: the study's output directory (a policy can find it) or a file a successful attack would
create.  Each first switches the audit hooks off (they are a second line, not the defence), so
that what stops it is the kernel or the channel; none catches what the kernel refuses but
:class:`CatchesRefusals`, which only the trusted side's listener can tell."""
import ctypes
import os
import pickle
import struct
import sys
import time

from study import Choice
from study.policies import argmax_playable, random_edge, uniform_neighbour


def hooks_off():
    """What a contestant reads in hooks.py: the hook returns at once while ``busy`` is set."""
    hooks = sys.modules.get("study.policies.hooks")
    if hooks is not None:
        hooks._local.busy = True


class _Attack:
    at = 2  # the step at which it attacks

    def __init__(self, setting, target="."):
        self.target = target

    def select(self, step):
        if step.t == self.at:
            hooks_off()
            self.attack(step)
        major = argmax_playable(step, step.theta @ step.x)
        return Choice(major, uniform_neighbour(step, major), False)


class _Plant:
    """Unpickled, creates the file ``path`` (what code run on the trusted side could do)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class SendsAPickle(_Attack):
    """Writes a message of the old protocol (length, pickle) into every descriptor it can: the
    trusted side used to unpickle it, running ``open(target, "w")`` there."""

    def attack(self, step):
        data = pickle.dumps(("done", 0, ("ok", _Plant(self.target))))
        for fd in range(3, 32):
            try:
                os.write(fd, struct.pack("<Q", len(data)) + data)
            except OSError:
                pass


class WritesNatively(_Attack):
    """Overwrites the stored parts under ``target`` (the output directory) by native code: pyarrow,
    ``numpy.tofile``, ``mmap`` and libc's ``open`` through ctypes (none raises an audit event)."""

    def attack(self, step):
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq
        planted = os.path.join(self.target, "forged.parquet")
        errors = []
        for name, write in (("pyarrow", lambda: pq.write_table(pa.table({"regret": [0.0]}), planted)),
                            ("tofile", lambda: np.zeros(3).tofile(planted + ".npy")),
                            ("mmap", lambda: self._mmap(planted + ".map")),
                            ("ctypes", lambda: self._libc(planted + ".c"))):
            try:
                write()
            except OSError as exc:
                errors.append(f"{name}: {type(exc).__name__} {exc.errno}")
        raise PermissionError("refused: " + "; ".join(errors))

    @staticmethod
    def _mmap(path):
        import mmap
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, 4096)
        mmap.mmap(fd, 4096)[:6] = b"forged"

    @staticmethod
    def _libc(path):
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "libc open")
        libc.write(fd, b"forged", 6)


class StartsProcesses(_Attack):
    """Every route to a new process (and a thread), hooks off: each must be refused."""

    def attack(self, step):
        import subprocess
        import threading
        outcomes = []
        for name, start in (("os.fork", os.fork), ("subprocess", lambda: subprocess.Popen(["true"])),
                            ("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {})),
                            ("system", lambda: self._system()),
                            ("thread", lambda: threading.Thread(target=len, args=((),)).start())):
            try:
                pid = start()
            except (OSError, RuntimeError) as exc:
                outcomes.append(f"{name} refused ({type(exc).__name__})")
                continue
            if pid == 0:
                os._exit(0)
            outcomes.append(f"{name} STARTED")
        raise PermissionError("; ".join(outcomes))

    @staticmethod
    def _system():
        if os.system("true") != 0:
            raise OSError("os.system failed")


class OpensSockets(_Attack):
    def attack(self, step):
        import socket
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9))


class ReadsOutputs(_Attack):
    """Lists and reads the stored parts under ``target`` (the output directory)."""

    def attack(self, step):
        for root, _, files in os.walk(self.target, onerror=lambda exc: (_ for _ in ()).throw(exc)):
            for name in files:
                with open(os.path.join(root, name), "rb") as handle:
                    handle.read()
        raise LookupError(f"read every file under {self.target}")


class SeeksTheTruth(_Attack):
    """Looks for theta* in its own process (the heap, the stack), hooks off; plays it if found."""

    def attack(self, step):
        import gc
        self.truth = next((vars(o)["theta_star"] for o in gc.get_objects()
                           if isinstance(getattr(o, "__dict__", None), dict) and "theta_star" in vars(o)), None)
        frame = sys._getframe()
        while self.truth is None and frame is not None:
            env = frame.f_locals.get("env")
            self.truth = getattr(env, "theta_star", None)
            frame = frame.f_back
        if self.truth is None:
            raise LookupError("theta* is nowhere in this process")

    def select(self, step):
        choice = super().select(step)
        if getattr(self, "truth", None) is not None:
            major = argmax_playable(step, self.truth @ step.x)
            return Choice(major, uniform_neighbour(step, major), False)
        return choice


class Clean:
    """RB's rule, as a user policy (the benchmark's and the tests' clean contestant)."""

    def __init__(self, setting):
        from study.policies import make_policy
        self.inner = make_policy("RB", setting)

    def select(self, step):
        return self.inner.select(step)


class Slow:
    """RB's rule, answering each step 5 ms late (sleeping): slower than the trusted side polls for."""

    def __init__(self, setting):
        from study.policies import make_policy
        self.inner = make_policy("RB", setting)

    def select(self, step):
        import time
        time.sleep(0.005)
        return self.inner.select(step)


class AsksAndUpdates:
    """Asks for the debiased estimate every step (in select and in update), draws from its
    generator, and keeps what update tells it: every message of the channel."""

    def __init__(self, setting):
        self.wins = 0

    def select(self, step):
        db = step.debiased()
        scores = db.theta_d @ step.x if db.available else step.theta @ step.x
        scores = scores + 1e-3 * step.rng.standard_normal(len(scores)) + 1e-6 * self.wins
        major = argmax_playable(step, scores)
        return Choice(major, uniform_neighbour(step, major), bool(step.t % 2))

    def update(self, step, choice, wins):
        step.debiased()
        self.wins += int(wins)


__all__ = ["AsksAndUpdates", "Clean", "OpensSockets", "ReadsOutputs", "SeeksTheTruth", "SendsAPickle",
           "Slow", "StartsProcesses", "WritesNatively", "random_edge"]


class CatchesRefusals(_Attack):
    """Catches what the kernel refuses (three sockets, a process) and goes on choosing as a clean
    policy would: only the trusted side's listener can tell (study.policies.refusals)."""

    def attack(self, step):
        import socket
        for attempt in (*[lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)] * 3, os.fork):
            try:
                if attempt() == 0:
                    os._exit(0)
            except OSError:
                pass


class CatchesWhenBuilt(CatchesRefusals):
    """The same, once, while it is built (before the first step)."""

    def __init__(self, setting, target="."):
        super().__init__(setting, target)
        self.at = -1
        hooks_off()
        self.attack(None)


class RefusesAfterItsLastAnswer(_Attack):
    """Declares threads; at its last step starts one that keeps trying sockets, catching each
    refusal, and answers ``lead`` seconds later: the calls it makes after that answer are seen by the
    check at the replication's end (``sandbox.ConfinedFactory.late_refusal``), those before by the
    check at the answer."""

    policy_needs = ("threads",)

    def __init__(self, setting, target=".", lead=0.0):
        super().__init__(setting, target)
        self.at, self.lead = setting.T, lead

    def attack(self, step):
        import socket
        import threading
        trying = threading.Event()

        def keep_trying():
            hooks_off()  # the hooks' state is per thread
            trying.set()
            while True:
                try:
                    socket.socket()
                except OSError:
                    pass

        threading.Thread(target=keep_trying, daemon=True).start()
        trying.wait()
        time.sleep(self.lead)


# linux/seccomp.h: SECCOMP_IOW(2, __u64); on a listener an unknown id gives ENOENT, elsewhere ENOTTY
NOTIF_ID_VALID = 0x40082102


def listeners(first=3, last=1024) -> list:
    """The descriptors of this process that are seccomp listeners."""
    import errno
    import fcntl
    found = []
    for fd in range(first, last):
        try:
            fcntl.ioctl(fd, NOTIF_ID_VALID, struct.pack("<Q", 0))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                found.append(fd)
    return found


class SeeksTheListener(_Attack):
    """Looks for its filter's listener among its descriptors: holding it, it could answer its own
    refusals ("go on") or drain them unseen."""

    def attack(self, step):
        found = listeners()
        raise LookupError(f"listeners at {found}" if found else "no listener in this process")
