"""The policy server and the confined policy's process: the side of the channel of
:mod:`study.policies.sandbox` that runs user code.

The policy server (``python -c ... serve(fd)``, started once per trusted process by
:func:`study.policies.sandbox._server`) imports :mod:`study` and the confinement's bindings and
never runs user code; it forks one process per replication, which confines itself by the kernel
(:mod:`study.policies.confine`) and installs the audit hook (:mod:`study.policies.hooks`) before
it unpickles the factory or imports the policy's module, then answers step by step (:class:`_Child`).
What it sends back is only the fixed formats the sandbox's module docstring lists.
"""
from __future__ import annotations

import json
import os
import pickle
import socket
import sys
import traceback

from . import confine, hooks
from .fresh import _read_exactly, _write_all
from .sandbox import _ANSWER, _DOWN, _LEN, _STEP, _UPDATE, MAX_TEXT, READY, TEXT, _Buffered


def _read_down(reader: _Buffered):
    """In the policy's process: (kind, payload bytes) from the trusted side, or (None, None) at its end."""
    buffer = reader.buffer
    if not buffer:  # the usual case: a whole frame in one read
        buffer = reader.buffer = os.read(reader.fd, reader.chunk)
        if not buffer:
            return None, None
    if len(buffer) >= _DOWN.size:
        kind, n = _DOWN.unpack_from(buffer)
        end = _DOWN.size + n
        if len(buffer) >= end:
            reader.buffer = buffer[end:]
            return kind, buffer[_DOWN.size:end]
    header = reader.read(_DOWN.size)
    if header is None:
        return None, None
    kind, n = _DOWN.unpack(header)
    data = reader.read(n)
    return (None, None) if data is None else (kind, data)


def _send_text(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")[:MAX_TEXT]
    _write_all(fd, b"E" + TEXT.pack(len(data)) + data)


def _described(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


# --- the policy's process -------------------------------------------------------------------

class _Child:
    """The loop of a confined policy process: build the policy, answer each step."""

    def __init__(self, job: dict, down: int, up: int, hand: int):
        self.job, self.down, self.up, self.hand = job, _Buffered(down), up, hand
        self.step = self.graph = self.rng = None

    def run(self) -> None:
        job = self.job
        os.chdir(job["scratch"])  # its working directory: the one place it may write (module docstring)
        needs = frozenset(job["needs"])
        hand = socket.socket(fileno=self.hand)
        try:
            if job["confine"]:
                try:  # extra_reads: the asker's path
                    applied = confine.confine(job["scratch"], needs, job["hidden"], extra_reads=job["path"], report=True)
                except Exception as exc:  # noqa: BLE001 -- reported, nothing of the policy has run
                    _send_text(self.up, f"ConfinementUnavailable: {exc}")
                    return
                if applied["listener"] is not None:  # to the trusted side; gone from here before the policy runs
                    try:
                        socket.send_fds(hand, [b"L"], [applied["listener"]])
                    finally:
                        os.close(applied["listener"])
        finally:
            hand.close()
        method = job["method"]
        # describing an import path, its declared needs are not known yet: the kernel refuses what
        # is not lifted, the audit hooks (the second line) refuse nothing (tempfile's probes go on
        # to the scratch directory)
        self.watch = hooks.Watch(method, hooks.policy_roots(method.partition(":")[0] if ":" in method else None),
                                 frozenset(hooks.NEEDS) if job.get("describe") else needs)
        hooks.install_for_process(self.watch)
        try:
            if job.get("global_seed") is not None:  # before any of the policy's code (ConfinedFactory)
                import random

                import numpy as np
                np.random.seed(job["global_seed"] % 2**32)
                random.seed(job["global_seed"])
            sys.path[:] = job["path"]
            from .registry import make_policy, resolve_policy
            if job["factory"] is not None:
                data, loader = job["factory"]
                factory = __import__(loader, fromlist=["loads"]).loads(data)
            else:
                factory = resolve_policy(method)
            if job.get("describe"):  # the asker's questions (registry.describe_import_path)
                from .provenance import description
                data = json.dumps(description(method, factory)).encode("utf-8")
                _write_all(self.up, b"J" + TEXT.pack(len(data)) + data)
                return
            self.factory = factory
            self.policy = make_policy(method, job["setting"], factory)
        except BaseException as exc:  # noqa: BLE001 -- the policy's failure, named
            _send_text(self.up, self._failure(exc, "building the policy"))
            return
        _write_all(self.up, self._ready())
        self.serve()

    def _ready(self) -> bytes:
        """The R message: the policy is built (and whether it has ``update``)."""
        return b"R" + READY.pack(callable(getattr(self.policy, "update", None)))

    def _failure(self, exc, what) -> str:
        """The failure's one-line summary, then its traceback in this process (text: the trusted
        side stores it for ``python -m study.results failures``, never runs it)."""
        summary = (f"SystemExit: the policy called sys.exit({exc.code!r}) while {what}" if isinstance(exc, SystemExit)
                   else _described(exc)).replace("\n", " ")
        trace = "".join(traceback.format_exception(exc))
        room = MAX_TEXT - len(summary.encode("utf-8", "replace")) - 200
        if len(trace) > room:
            trace = "... (the traceback's start cut)\n" + trace[-max(room, 0):]
        return f"{summary}\n{trace}"

    def serve(self) -> None:
        import numpy as np

        from ..simulation.settings import public_view
        from .base import Choice, Step, is_flag, unpack_choice
        setting = public_view(self.job["setting"])
        layout = theta = None
        while True:
            kind, data = _read_down(self.down)
            if kind is None:
                return
            refused = len(self.watch.refusals)
            try:
                if kind == b"N":  # another replication in this process (ConfinedFactory's reuse): built anew
                    self.job["setting"] = pickle.loads(data)
                    setting, layout, theta = public_view(self.job["setting"]), None, None
                    self.step = self.graph = self.rng = None
                    from .registry import make_policy
                    self.policy = make_policy(self.job["method"], self.job["setting"], self.factory)
                    answer = self._ready()
                elif kind == b"F":  # once a replication: the policy's graph and generator
                    self.graph, state = pickle.loads(data)
                    bits = getattr(np.random, state["bit_generator"])()
                    bits.state = state
                    self.rng = np.random.Generator(bits)
                    continue
                elif kind == b"L":  # the arrays' layout (dtype, shape of x, of theta): once, or when it changes
                    layout = pickle.loads(data)
                    x_type, theta_type = np.dtype(layout[0]), np.dtype(layout[2])
                    x_count = int(np.prod(layout[1], dtype=np.int64))
                    x_shape = None if len(layout[1]) == 1 else layout[1]
                    theta_at = _STEP.size + x_type.itemsize * x_count
                    continue
                elif kind == b"S":
                    t, fresh_theta, coin, edge, end, neighbour = _STEP.unpack_from(data)
                    # arrays over the frame's bytes: read-only, as the loop's copies are
                    x = np.frombuffer(data, x_type, x_count, _STEP.size)
                    if fresh_theta:
                        theta = np.frombuffer(data, theta_type, -1, theta_at).reshape(layout[3])
                    step = self.step = Step.__new__(Step)  # built from its slots: the values are already owned
                    step.t, step.x, step.graph, step.setting, step.rng = t, x, self.graph, setting, self.rng
                    if x_shape is not None:
                        step.x = x.reshape(x_shape)
                    step.coin, step.edge, step.end, step.neighbour = coin, edge, end, neighbour
                    step._theta, step._debias = theta, self._debiased()
                    choice = self.policy.select(step)
                    if type(choice) is Choice and choice[2].__class__ is bool:  # checked when it was built
                        major, other, explored = choice
                    else:
                        try:
                            major, other, explored = unpack_choice(choice)
                        except TypeError:
                            raise TypeError(f"select at t={t} returned {choice!r}; expected a Choice(major, other, "
                                            "explored) with integer items") from None
                        if not is_flag(explored):
                            raise TypeError(f"select at t={t} returned explored={explored!r}; it must be a bool")
                    answer = _ANSWER.pack(b"C", major, other, bool(explored))
                else:  # b"U": the comparison's outcome
                    major, other, explored, wins = _UPDATE.unpack(data)
                    self.policy.update(self.step, Choice(major, other, bool(explored)), wins)
                    answer = b"U"
            except BaseException as exc:  # noqa: BLE001 -- the policy's failure, named
                what = {b"S": "select", b"U": "update", b"N": "building the policy"}.get(kind, "reading its step")
                _send_text(self.up, self._failure(exc, what))
                return
            if len(self.watch.refusals) > refused:
                _send_text(self.up, f"PolicyRefused: {self.watch.refusals[refused]} (the policy caught the refusal "
                                    "and went on; its result is not stored)")
                return
            sent = os.write(self.up, answer)  # a few bytes: written whole (a pipe's writes under 4 KiB are atomic)
            if sent < len(answer):
                _write_all(self.up, answer[sent:])

    def _debiased(self):
        cache = []

        def debiased():
            if not cache:
                _write_all(self.up, b"D")
                kind, data = _read_down(self.down)
                if kind != b"D":
                    raise RuntimeError("the trusted side ended the replication")
                cache.append(pickle.loads(data))  # from the trusted side
            return cache[0]

        return debiased


# --- the policy server --------------------------------------------------------------------

_LOADERS = ("cloudpickle", "ray.cloudpickle")  # the factories' unpicklers (study.policies.fresh.dumps)

def serve(fd: int) -> None:
    """The policy server's loop (``python -c ... serve(fd)``): receive a job, the two ends of its
    pipes and a socket for its refusals' listener (:mod:`study.policies.refusals`) on socket ``fd``,
    fork a child that runs it, answer its pid and a pidfd."""
    control = socket.socket(fileno=fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    from . import fresh
    __import__(fresh.PRELOAD)
    fresh._warm()
    confine.prepare()  # the children's confinement, ready before any fork
    import gc
    gc.freeze()
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(control, _LEN.size, 3)
        except OSError:
            return
        if len(header) < _LEN.size:
            return
        data = _read_exactly(control.fileno(), _LEN.unpack(header)[0])
        if data is None or len(fds) != 3:
            return
        job = pickle.loads(data)  # from the trusted process that started this server
        loader = job["factory"][1] if job.get("factory") is not None else None
        if loader in _LOADERS and loader not in sys.modules:
            # imported once, here, not in every child: ray.cloudpickle's import (all of ray) took
            # 0.3 s of each replication of a registered policy
            __import__(loader, fromlist=["loads"])
        pid = os.fork()
        if pid == 0:
            try:
                start = 3  # nothing but its own two pipes and the listener's socket stays open in the child
                for fd in sorted(fds):
                    os.closerange(start, fd)
                    start = fd + 1
                os.closerange(start, 1 << 16)
                _Child(job, *fds).run()
            finally:
                os._exit(0)
        for end in fds:
            os.close(end)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(control, [_LEN.pack(pid)], [pidfd])
        os.close(pidfd)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
