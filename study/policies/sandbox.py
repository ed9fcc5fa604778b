"""A user policy in a confined process of its own, asked step by step through a channel that
carries nothing executable back.

The trusted process (the worker that runs the replication's loop: the environment, theta*, the
estimator, the storage) builds the policy through :class:`ConfinedFactory`: a process forked from
a policy server (started once per trusted process, ``python -c ... serve``, the loop of
:mod:`study.policies.policy_server`; it imports :mod:`study` and never runs user code) is confined
by the kernel (:mod:`study.policies.confine`) and watched by the audit hook
(:mod:`study.policies.hooks`, the second line) *before* it unpickles the factory or imports the
policy's module.  Then, per step, it is handed what
``select(step)`` is given -- t, the context, the shared uniforms, theta(t-1), the graph, the
public setting, its private generator, and the debiased estimate on request -- and answers.

Down, to the policy's process, each step is one fixed binary frame (``S``: t, x, the four
uniforms and theta(t-1) as raw float64 -- theta only when it changed -- read in the policy's
process as read-only arrays of the layout announced once per replication, ``L``); what is sent once
(the graph, the policy's generator, the layout), on demand (``D``: the debiased estimate) and
per replication after the first where a process serves several (``N``: the next replication's
setting, the policy built anew and answering ``R``; ``ConfinedFactory(reuse=True)``) is pickled, in
the direction in which unpickling is harmless.  Each step costs one write and one read
on each side; the trusted side polls for the answer for at most :data:`SPIN_SECONDS` before it
blocks (its comment says why), and the time limit is a watchdog thread that ends the policy's
process (no timer per step).

What crosses from the policy's process to the trusted one is a byte of kind and a fixed payload,
parsed with :mod:`struct`, never unpickled, evaluated or imported:

====  ============================  ===============================================
kind  payload                       meaning
====  ============================  ===============================================
R     ``<B`` (1 if it has update)   the policy is built
C     ``<qqB`` major, other, 0/1    its choice at this step
D     none                          it asks for ``step.debiased()``
U     none                          its ``update`` returned
E     ``<I`` length, UTF-8 text     it failed (the text is shown, never run)
====  ============================  ===============================================

Anything else (another byte, an ``explored`` that is not 0 or 1, an error text over 4 KiB, a
message out of turn) ends the replication as failed with :class:`ChannelError`.
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import confine, refusals
from .fresh import _write_all  # the pipes' framing, shared with the fresh processes

_LEN = struct.Struct("<Q")
_DOWN = struct.Struct("<cQ")  # trusted -> policy: kind, length of the payload that follows
_STEP = struct.Struct("<qB4d")  # an S frame's head: t, theta sent (0/1), the four uniforms; then x [, theta]
_S_HEAD = struct.Struct("<cQqB4d")  # _DOWN and _STEP in one
_UPDATE = struct.Struct("<qqBq")  # a U frame: major, other, explored, wins
CHOICE = struct.Struct("<qqB")
_ANSWER = struct.Struct("<cqqB")  # a C message: its kind and CHOICE in one
READY = struct.Struct("<B")
TEXT = struct.Struct("<I")
MAX_DESCRIPTION = 1 << 20
MAX_TEXT = 16384  # an error's first line, then the policy's traceback (its last lines kept)
# How long the trusted side polls for an answer (non-blocking reads, yielding the CPU) before it
# blocks.  A blocking read lets the loop's CPU go idle (on a virtual machine its vCPU halts): its
# wake-up costs tens of microseconds, and the loop's own numerical work after it ran slower (cold
# caches).  A clean policy answers in ~0.05-0.2 ms; a slower one is not polled for (_read_spinning).
# Polling moves cost from wall time to the loop's CPU (docs/baselines.md, "Cost").
SPIN_SECONDS = 0.0005
_LOCK = threading.Lock()
_SERVER: list = []


class PolicyProcessError(RuntimeError):
    """The policy's process failed a replication: ``message`` says how, in one line; ``trace`` is
    the traceback the policy's process sent as text (empty where it sent none)."""

    def __init__(self, message: str, trace: str = ""):
        super().__init__(message)
        self.message, self.trace = message, trace


class ChannelError(PolicyProcessError):
    """The policy's process sent something outside the channel's format."""


class PolicyCrashed(PolicyProcessError):
    """The policy's process ended without answering."""


class PolicyRefused(PolicyProcessError):
    """The kernel refused a call of the policy's process, which caught the refusal and went on."""


class PolicyTimeout(PolicyProcessError):
    """The policy's process did not answer before the replication's time limit; it was ended."""


# --- bytes on pipes -------------------------------------------------------------------------

def _frame(kind: bytes, payload: bytes) -> bytes:
    return _DOWN.pack(kind, len(payload)) + payload


def _pickled(kind: bytes, obj) -> bytes:
    return _frame(kind, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


class _Buffered:
    """Reads from a pipe through a buffer: a message's header and body in one system call where
    they arrived together (one read a step).  Reads ask for at most ``chunk`` bytes: a 64 KiB
    request allocates (and gives back) 64 KiB a call, which cost measurably per step."""

    chunk = 4096

    def __init__(self, fd: int):
        self.fd, self.buffer, self._poll = fd, b"", None

    def poll(self):
        """The ``poll`` method of a :func:`select.poll` object that watches this pipe."""
        if self._poll is None:
            import select
            self._poll = select.poll()
            self._poll.register(self.fd, select.POLLIN)
        return self._poll.poll

    def pull(self, n: int) -> bool:
        """One read towards ``n`` buffered bytes; False at the pipe's end (a non-blocking pipe with
        nothing yet: True, nothing added)."""
        try:
            chunk = os.read(self.fd, max(n - len(self.buffer), self.chunk))
        except BlockingIOError:  # (the trusted side's descriptor does not block: _read_spinning)
            return True
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def take(self, n: int) -> bytes:
        """The first ``n`` buffered bytes, removed from the buffer."""
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            if not self.pull(n):
                return None
        return self.take(n)


# --- the policy server (its loop and the policy's process: study.policies.policy_server) ----

class _Server:
    def __init__(self):
        ours, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[2])
        code = (f"import sys; sys.path.insert(0, {root!r}); from study.policies.policy_server import serve; "
                f"serve({theirs.fileno()})")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                        pass_fds=(theirs.fileno(),), close_fds=True, env=env)
        theirs.close()
        self.control = ours

    def start(self, job: dict) -> tuple:
        """Fork a policy process for ``job``: (pid, pidfd, fd to write to it, fd it answers on, the
        socket on which it sends its refusals' listener)."""
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        hand, theirs = socket.socketpair()
        try:
            data = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
            socket.send_fds(self.control, [_LEN.pack(len(data))], [down_r, up_w, theirs.fileno()])
            self.control.sendall(data)
            header, fds, _, _ = socket.recv_fds(self.control, _LEN.size, 1)
        finally:
            os.close(down_r)
            os.close(up_w)
            theirs.close()
        if len(header) < _LEN.size or len(fds) != 1:
            os.close(down_w)
            os.close(up_r)
            hand.close()
            raise OSError("the policy server did not answer")
        return _LEN.unpack(header)[0], fds[0], down_w, up_r, hand

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _server() -> _Server:
    if not _SERVER or not _SERVER[0].alive():
        while _SERVER:
            _SERVER.pop().close()
        _SERVER.append(_Server())
    return _SERVER[0]


def close_server() -> None:
    with _LOCK:
        while _SERVER:
            _SERVER.pop().close()


import atexit  # noqa: E402

atexit.register(close_server)


# --- the trusted side ---------------------------------------------------------------------

class ConfinedFactory:
    """A factory (``factory(setting) -> policy``) whose policies run in confined processes: the
    trusted loop calls :class:`RemotePolicy`, which asks the policy's process each step.

    Parameters
    ----------
    method : str
        The method's name (an import path is resolved in the policy's process, after confinement).
    factory_bytes : tuple or None
        ``(bytes, loader)`` of a registered factory (:func:`study.policies.fresh.dumps`).
    needs : iterable of str
        The needs the policy declares (they lift the matching kernel rules).
    hidden : iterable of str
        Paths the policy's process may not read (the study's output directory).
    trust : bool
        Run without kernel confinement where the machine has none (``--trust-policy-code``).
    seconds : float or None
        The replication's time limit: a policy that has not answered by then has its process ended.
    global_seed : int or None
        Seed the policy's process's global generators (numpy's legacy ``np.random``, Python's
        ``random``) with it before the policy is built (:func:`study.check_policy`: a policy that
        draws from them then chooses differently under two seeds).  None: they are left as the
        policy server's, the same in every process.
    reuse : bool
        Build each policy after the first in the process of the one before (built anew there, as
        a worker builds one per replication), while that process is alive: what the policy keeps
        across replications in its process then shows (:func:`study.check_policy`'s
        ``shared_state``).  False: a process per policy.
    """

    def __init__(self, method, factory_bytes=None, needs=(), hidden=(), trust=False, seconds=None, global_seed=None,
                 reuse=False):
        self.method, self.factory_bytes, self.needs = method, factory_bytes, tuple(needs)
        self.hidden, self.trust, self.seconds = tuple(str(h) for h in hidden), bool(trust), seconds
        self.global_seed = None if global_seed is None else int(global_seed)
        self.reuse = bool(reuse)
        self.processes: list = []

    def __call__(self, setting):
        if self.reuse and self.processes and self.processes[-1].up is not None:
            return self.processes[-1].renew(setting)
        kernel = confine.status()["available"]
        if not kernel and not self.trust:
            raise PolicyProcessError(f"ConfinementUnavailable: user policy {self.method!r} cannot be confined on this "
                                     f"machine ({confine.status()['reason']}); run it with --trust-policy-code "
                                     "(trust_policy_code=True) to run it with the audit hooks only")
        process = _Process(self, setting, kernel)
        self.processes.append(process)
        return process.policy

    def late_refusal(self) -> str | None:
        """The failure of a replication whose policy's processes made a call the kernel refused
        after the policy's last answer (a thread or process of its own still running then), or None:
        called when the replication is done, before :meth:`close` ends those processes (which would
        withdraw a refusal the watch has not received yet: :meth:`refusals.RefusalWatch.settle`)."""
        for process in self.processes:
            watch = process.refusals
            if watch is None or process.up is None:
                continue
            watch.settle()
            if watch.refused:
                return (f"PolicyRefused: the kernel refused {watch.describe()} after the policy's last answer (a "
                        "thread or process of its own still ran); its result is not stored (the confined process "
                        f"of policy {self.method!r})")
        return None

    def close(self) -> None:
        while self.processes:
            self.processes.pop().close()


class _Process:
    waits = misses = 0  # _read_spinning's counts
    def __init__(self, owner: ConfinedFactory, setting, kernel: bool, describe: bool = False):
        self.owner, self.scratch = owner, confine.scratch_dir()
        self.expired, self.watchdog, self._kill_lock = False, None, threading.Lock()
        self.deadline = None  # set by _start_clock
        job = {"method": owner.method, "factory": owner.factory_bytes, "needs": owner.needs, "hidden": owner.hidden,
               "confine": kernel, "scratch": self.scratch, "path": confine.asker_path(), "setting": setting,
               "describe": describe, "global_seed": owner.global_seed}
        self.pidfd = self.down = self.up = self.refusals = None
        with _LOCK:
            try:
                self.pid, self.pidfd, self.down, self.up, hand = _server().start(job)
            except OSError:  # the server went away: once more with a new one
                while _SERVER:
                    _SERVER.pop().close()
                self.pid, self.pidfd, self.down, self.up, hand = _server().start(job)
        self._start_clock()
        # sent (or not, its socket closed) before any of the policy's code runs
        listener = refusals.receive(hand, owner.seconds)
        if listener is not None:
            self.refusals = refusals.RefusalWatch(listener, owner.method)
        self.reader = _Buffered(self.up)
        os.set_blocking(self.up, False)  # read by polling first (_read_spinning)
        kind = self.kind()
        if describe:
            if kind != b"J":
                self.unexpected(kind, "J")
            (n,) = TEXT.unpack(self.read(TEXT.size))
            if n > MAX_DESCRIPTION:
                raise self.fail(ChannelError, f"a description of {n} bytes (at most {MAX_DESCRIPTION})")
            data = self.read(n)
            self.close()
            try:
                self.description = json.loads(data.decode("utf-8"))  # data, never run
            except ValueError:
                raise ChannelError(f"ChannelError: the description of policy {owner.method!r} is not JSON") from None
            return
        self._built(kind)

    def _built(self, kind: bytes) -> None:
        if kind != b"R":
            self.unexpected(kind, "R")
        has_update = READY.unpack(self.read(READY.size))[0]
        if has_update not in (0, 1):
            raise self.fail(ChannelError, f"the ready message's flag was {has_update}, not 0 or 1")
        self.check_refusals("building the policy", None)
        self.policy = RemotePolicy(self, bool(has_update))

    def _start_clock(self) -> None:
        """The replication's time limit, from now."""
        seconds = self.owner.seconds
        if seconds is None:
            return
        if "processes" in self.owner.needs:
            # a policy that may start processes could hand its channel to one that outlives it: its
            # reads then wait with a deadline (a poll per read); every other policy has a watchdog
            self.deadline = time.monotonic() + seconds
            return
        # the time limit without a system call per step: a timer that ends the process, whose end
        # the blocked read then sees (end of file)
        if self.watchdog is not None:
            self.watchdog.cancel()
        self.watchdog = threading.Timer(seconds, self._expire)
        self.watchdog.daemon = True
        self.watchdog.start()

    def renew(self, setting):
        """The next replication's policy, built anew in this process (``ConfinedFactory(reuse=True)``)."""
        self.send(_pickled(b"N", setting))
        self._start_clock()
        self._built(self.kind())
        return self.policy

    def check_refusals(self, what: str, t) -> None:
        """Fail the replication if the kernel has refused a call of the policy's process: called
        after an answer (to ``what`` at step ``t``, None while it is built), so the policy caught the
        refusal (else its error would have come instead)."""
        watch = self.refusals
        if watch is not None and watch.refused:
            during = what if t is None else f"{what} at t={t}"
            raise self.fail(PolicyRefused, f"the kernel refused {watch.describe()} while {during}; the policy "
                                           "caught the refusal and went on (its result is not stored)")

    def _expire(self) -> None:
        with self._kill_lock:
            if self.pidfd is not None:
                self.expired = True
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                except OSError:  # already ended
                    pass

    def fail(self, cls, detail: str) -> PolicyProcessError:
        self.close()
        return cls(f"{cls.__name__}: {detail} (the confined process of policy {self.owner.method!r})")

    def _timed_out(self) -> PolicyProcessError:
        return self.fail(PolicyTimeout, f"no answer within the time limit of {self.owner.seconds:g} s; its process "
                                        "was ended")

    def read(self, n: int) -> bytes:
        reader = self.reader
        if len(reader.buffer) >= n:  # most reads: the answer arrived whole with its kind
            return reader.take(n)
        if self.deadline is not None:
            data = self._read_until(n)
        else:
            data = self._read_spinning(n)
        if data is None:
            if self.expired:
                raise self._timed_out()
            raise self.fail(PolicyCrashed, "its process ended without an answer (os._exit, a fatal signal, the "
                                           "kernel's OOM killer, or a call the kernel refused by ending it)")
        return data

    def _read_spinning(self, n: int) -> bytes | None:
        """``n`` bytes from the policy's process (None at its end): polled without blocking for up
        to :data:`SPIN_SECONDS` (its comment), then waited for (the watchdog's kill of a hung
        policy ends the wait: end of file).  A policy whose answers take longer than that is not
        polled for (after three misses; tried again every 32nd wait): polling would only cost CPU."""
        reader = self.reader
        poll = reader.poll()
        self.waits += 1
        end = None if self.misses < 3 or self.waits % 32 == 0 else 0.0
        while len(reader.buffer) < n:
            if not poll(0):
                now = time.perf_counter()
                if end is None:
                    end = now + SPIN_SECONDS
                if now < end:
                    os.sched_yield()  # the policy's process may be waiting for this CPU
                    continue
                if end:
                    self.misses += 1
                    end = 0.0
                poll()  # no timeout: bounded by the watchdog
            elif end:
                self.misses = 0
            if not reader.pull(n):
                return None
        return reader.take(n)

    def _read_until(self, n: int) -> bytes | None:
        import select
        reader = self.reader
        while len(reader.buffer) < n:
            wait = self.deadline - time.monotonic()
            if wait <= 0 or not select.select([reader.fd], [], [], wait)[0]:
                raise self._timed_out()
            if not reader.pull(n):
                return None
        return reader.take(n)

    def kind(self) -> bytes:
        kind = self.read(1)
        if kind == b"E":
            (n,) = TEXT.unpack(self.read(TEXT.size))
            if n > MAX_TEXT:
                raise self.fail(ChannelError, f"an error message of {n} bytes (at most {MAX_TEXT})")
            summary, _, trace = self.read(n).decode("utf-8", "replace").partition("\n")
            self.close()
            raise PolicyProcessError(f"{summary} (in the confined process of policy {self.owner.method!r})", trace)
        return kind

    def unexpected(self, kind: bytes, wanted: str):
        raise self.fail(ChannelError, f"it sent a message of kind {kind!r} where {wanted!r} was due: the channel "
                                      "carries only R, C, D, U and E messages of fixed format, never objects")

    def send(self, frames: bytes) -> None:
        try:
            sent = os.write(self.down, frames)  # a step's frame: one call
            if sent < len(frames):
                _write_all(self.down, frames[sent:])
        except (BrokenPipeError, OSError):
            self.kind()  # its last words, if any
            raise self.fail(PolicyCrashed, "its process ended without an answer") from None

    def close(self) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.refusals is not None:
            self.refusals.stop()
        for fd in (self.down, self.up):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.down = self.up = None
        with self._kill_lock:
            if self.pidfd is not None:
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                except OSError:  # already ended
                    pass
                os.close(self.pidfd)
                self.pidfd = None
        confine.remove_scratch(self.scratch)


class RemotePolicy:
    """The trusted side's stand-in for a policy in a confined process (:class:`ConfinedFactory`)."""

    def __init__(self, process: _Process, has_update: bool):
        self._process, self._first, self._layout, self._theta = process, True, None, None
        if has_update:
            self.update = self._update

    def _serve(self, step, wanted: bytes) -> bytes:
        process = self._process
        while True:
            kind = process.kind()
            if kind == b"D":
                process.send(_pickled(b"D", step.debiased()))
                continue
            if kind != wanted:
                process.unexpected(kind, wanted.decode())
            return kind

    def select(self, step):
        frames = []
        if self._first:
            frames.append(_pickled(b"F", (step.graph, step.rng.bit_generator.state)))
            self._first = False
        x, theta = step.x, step.theta
        key = (x.dtype, x.shape, theta.dtype, theta.shape)
        if key != self._layout:
            if x.dtype.hasobject or theta.dtype.hasobject:
                raise TypeError(f"a step's x ({x.dtype}) and theta ({theta.dtype}) must be numeric arrays")
            frames.append(_pickled(b"L", (x.dtype.str, x.shape, theta.dtype.str, theta.shape)))
            self._layout, self._theta = key, None
        theta_bytes = theta.tobytes()
        fresh = theta_bytes != self._theta  # theta is sent only when it changed
        self._theta = theta_bytes
        x_bytes = x.tobytes()
        if not fresh:
            theta_bytes = b""
        frames.append(_S_HEAD.pack(b"S", _STEP.size + len(x_bytes) + len(theta_bytes), step.t, fresh, step.coin,
                                   step.edge, step.end, step.neighbour))
        frames.append(x_bytes)
        frames.append(theta_bytes)
        process = self._process
        process.send(b"".join(frames))
        self._serve(step, b"C")
        major, other, explored = CHOICE.unpack(process.read(CHOICE.size))
        if explored not in (0, 1):
            raise process.fail(ChannelError, f"explored={explored} in a choice, not 0 or 1")
        process.check_refusals("select", step.t)
        return major, other, bool(explored)

    def _update(self, step, choice, wins):
        process = self._process
        process.send(_frame(b"U", _UPDATE.pack(int(choice[0]), int(choice[1]), bool(choice[2]), int(wins))))
        self._serve(step, b"U")
        process.check_refusals("update", step.t)
