"""Work run in fresh processes that can be ended: the checks of :func:`study.check_policy` on a
user policy (confined by the kernel, :mod:`study.policies.confine`; its ``shared_state`` check
needs fresh processes: a policy that keeps state across replications -- a module-level cache, a
class attribute -- gives a replication that depends on what ran before it in the same worker,
which a fresh process shows), and the hard stop of a built-in method's replication that outlives
its setting's ``time_limit`` (:mod:`study.runner.worker`; a user policy's replications run through
:mod:`study.policies.sandbox` instead).

A job that runs user code (``confined``) is confined in its child before its factory is
unpickled, and its child answers in JSON of plain data, relayed as JSON: neither the server nor
the asking process unpickles anything such a child sends.

A fresh process is forked from a small server process started once per process that asks
(``python -m study.policies.fresh``): it imports :mod:`study` and never runs user code itself, so
each job costs a fork rather than an interpreter start, and the forked child starts from a state
no policy has touched.  (``multiprocessing`` is not used: its children re-import the parent's
``__main__``, which re-runs a user's script, and fails for code read from stdin.)  The factory
travels pickled (cloudpickle where available, as Ray ships a factory to its workers: by value for a
``__main__`` or local class, by reference otherwise) with this process's ``sys.path``.  Where
``os.fork`` does not exist, every job gets a server of its own.
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

PRELOAD = "study.policies.checks"
_HEADER = struct.Struct("<Q")
_JSON_MAX = 1 << 26  # the largest answer a confined child may send (64 MiB of JSON)
_CONFINED: list = []  # in a child: the confinement applied (once per process)
_LOCK = threading.Lock()
_SERVER: list = []


def dumps(factory) -> tuple:
    """(bytes, loader module) of ``factory``: cloudpickle where available, else stdlib pickle."""
    for name in ("cloudpickle", "ray.cloudpickle"):
        try:
            module = __import__(name, fromlist=["dumps"])
        except ImportError:
            continue
        return module.dumps(factory), name
    return pickle.dumps(factory), "pickle"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write(fd: int, obj, as_json: bool = False) -> None:
    data = json.dumps(obj, allow_nan=True).encode() if as_json else pickle.dumps(obj)
    _write_all(fd, _HEADER.pack(len(data)) + data)


def _read_exactly(fd: int, n: int, deadline=None) -> bytes | None:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline=None, as_json: bool = False):
    """One message from ``fd``; None at end of file; TimeoutError after ``deadline``.  ``as_json``
    (what a child that ran user code sends): JSON of plain data, never unpickled; anything else
    (not JSON, over 64 MiB) raises ValueError."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return None
    size = _HEADER.unpack(header)[0]
    if as_json and size > _JSON_MAX:
        raise ValueError(f"a message of {size} bytes from a confined process (at most {_JSON_MAX})")
    data = _read_exactly(fd, size, deadline)
    if data is None:
        return None
    if not as_json:
        return pickle.loads(data)  # from a process that ran no user code
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("a message from a confined process that is not JSON") from None


# --- the server (runs as ``python -m study.policies.fresh``) --------------------------------------

def _confine_here(confined: dict, path) -> None:
    """Confine this child by the kernel (:mod:`study.policies.confine`) before any user code is
    unpickled, where the machine can; its scratch directory is its working directory."""
    if _CONFINED:
        return
    from . import confine
    os.chdir(confined["scratch"])
    if confine.status()["available"]:
        confine.confine(confined["scratch"], frozenset(confined["needs"]), confined["hidden"], extra_reads=path)
    _CONFINED.append(True)


def _outcome(job):
    """Rebuild the factory and run the job: ("ok", value) or ("error", message)."""
    path, data, loader, run, args, confined = job
    try:
        if confined is not None:
            _confine_here(confined, path)
        sys.path[:] = path
        factory = __import__(loader, fromlist=["loads"]).loads(data)
        return ("ok", run(factory, *args))
    except BaseException as exc:  # noqa: BLE001 -- reported to the asking process
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
        return ("error", f"{type(exc).__name__}: {exc}{where}")


def _fork(work, protocol: tuple) -> tuple:
    """Fork a child that runs ``work(fd)`` (writing its messages to ``fd``) and exits; returns (pid,
    the fd its messages arrive on)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fresh child: nothing of the server's protocol stays open in it
        try:
            os.close(read_fd)
            for fd in protocol:
                os.close(fd)
            work(write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    return pid, read_fd


def _send(fd: int, message, as_json: bool = False) -> None:
    try:
        _write(fd, message, as_json)
    except Exception:  # noqa: BLE001 -- a value that does not pickle (or is not plain data)
        _write(fd, message[:-1] + (("error", "the fresh process's result could not be sent back"),), as_json)


def _serve_each(jobs, timeout: float, protocol: tuple) -> list:
    """Each job in a forked child of its own, all at once (each killed after ``timeout`` seconds)."""
    started = [_fork(lambda fd, job=job: _send(fd, (_outcome(job),), job[5] is not None), protocol) for job in jobs]
    deadline, outcomes = time.monotonic() + timeout, []
    for (pid, read_fd), job in zip(started, jobs):
        try:
            message = _read(read_fd, deadline, as_json=job[5] is not None)
            outcome = None if message is None else _checked_outcome(message)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            outcome = ("timeout", f"the run did not finish within {timeout:g} s in a fresh process, which was ended")
        except ValueError as exc:  # a confined child's message outside the format
            os.kill(pid, signal.SIGKILL)
            outcome = ("error", f"ChannelError: {exc}")
        finally:
            os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        if outcome is None:
            outcome = ("crashed", f"the fresh process ended without a result ({_how(status)})")
        outcomes.append(outcome)
    return outcomes


def _checked_outcome(message):
    """The outcome of a message [(status, value)]: status a known string, else ValueError."""
    if not isinstance(message, (list, tuple)) or len(message) != 1 or not isinstance(message[0], (list, tuple)) \
            or len(message[0]) != 2 or message[0][0] not in ("ok", "error"):
        raise ValueError("a message from a fresh process that is not [(status, value)]")
    return tuple(message[0])


def _run_in_order(jobs, first: int, fd: int) -> None:
    """In a child: jobs[first:] one after the other, each announced ("start", k) and answered
    ("done", k, outcome)."""
    for k in range(first, len(jobs)):
        _write(fd, ("start", k))
        _send(fd, ("done", k, _outcome(jobs[k])))


def _serve_in_order(jobs, timeout, protocol: tuple, max_crashes=None) -> list:
    """The jobs one after the other in a forked child; a job still running ``timeout`` seconds after
    it started (None: no limit) has the child ended (a hard stop) and the rest continue in a new
    child, and so do they after a job that ends its process -- until ``max_crashes`` jobs have ended
    theirs: the rest are then ("not_run", ...)."""
    outcomes: list = [None] * len(jobs)
    first = 0
    while first < len(jobs):
        if max_crashes is not None and sum(o is not None and o[0] == "crashed" for o in outcomes) >= max_crashes:
            outcomes[first:] = [("not_run", f"{max_crashes} jobs ended their process")] * (len(jobs) - first)
            break
        pid, read_fd = _fork(lambda fd, start=first: _run_in_order(jobs, start, fd), protocol)
        current, deadline = None, None
        try:
            while True:
                message = _read(read_fd, deadline)
                if message is None:
                    break
                if message[0] == "start":
                    current, deadline = message[1], None if timeout is None else time.monotonic() + timeout
                else:
                    outcomes[message[1]] = message[2]
                    current, deadline = None, None
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            outcomes[current] = ("timeout", f"still running {timeout:g} s after it started; its process was ended")
        finally:
            os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        stopped = current if current is not None else first
        if outcomes[stopped] is None:  # it ended its process (or the child died before starting it)
            outcomes[stopped] = ("crashed", f"its process ended without a result ({_how(status)})")
        first = max(k for k, outcome in enumerate(outcomes) if outcome is not None) + 1
    return outcomes


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"wait status {status}"


def _warm() -> None:
    """One short replication of a built-in method here, before any fork, so that a first run's
    one-off costs (lazy imports and caches of numpy, scipy and the loop: about 0.1-0.2 s) are paid
    once rather than by every child.  No user code runs here."""
    from ..simulation.replication import run_replication
    run_replication("A", "RB-UA", 0, T=80, T0=32, ci_every=10)


def serve() -> None:
    """The server's loop: read jobs on stdin, run each in a forked child, answer on stdout."""
    commands, answers = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # nothing a child does can read the jobs or write into the answers
    os.dup2(2, 1)
    __import__(PRELOAD)
    _warm()
    from . import confine
    confine.prepare()  # the children's confinement, ready before any fork
    gc.freeze()  # the server's objects stay out of the children's collections (fewer copied pages)
    while True:
        message = _read(commands)
        if message is None:
            return
        mode, jobs, timeout, max_crashes = message
        for loader in {job[2] for job in jobs}:
            try:
                __import__(loader)  # the factory's loader: imported once here, inherited by every child
            except ImportError:
                pass
        as_json = any(job[5] is not None for job in jobs)  # the asker never unpickles what user code touched
        if not hasattr(os, "fork"):  # a server per request (FreshRuns): this process is fresh
            _write(answers, [_outcome(job) for job in jobs], as_json)
        elif mode == "each":
            _write(answers, _serve_each(jobs, timeout, (commands, answers)), as_json)
        else:
            _write(answers, _serve_in_order(jobs, timeout, (commands, answers), max_crashes))


# --- the asking side ----------------------------------------------------------------------------

class _Server:
    def __init__(self):
        root = str(Path(__file__).resolve().parents[2])  # the directory holding the study package
        code = f"import sys; sys.path.insert(0, {root!r}); from study.policies.fresh import serve; serve()"
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        close_fds=True)
        self.commands, self.answers = self.process.stdin.fileno(), self.process.stdout.fileno()

    def send(self, mode: str, jobs: list, timeout, max_crashes=None) -> None:
        _write(self.commands, (mode, jobs, timeout, max_crashes))

    def receive(self, n: int, timeout, as_json: bool = False) -> list:
        try:  # in order, each job may take the timeout; then the server's start and the forks
            answer = _read(self.answers, None if timeout is None else time.monotonic() + n * timeout + 60.0, as_json)
            if as_json:
                answer = [_checked_outcome([o]) if not (isinstance(o, list) and o and o[0] in ("timeout", "crashed"))
                          else tuple(o) for o in answer]
                if len(answer) != n:
                    raise ValueError("an answer of the wrong length")
        except (TimeoutError, ValueError, TypeError):
            answer = None
        if answer is None:
            self.close()
            return [("crashed", "the fresh-process server did not answer")] * n
        return answer

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, kill: bool = False) -> None:
        try:
            if kill:
                self.process.kill()
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 -- already gone, or busy: ended
            self.process.kill()


def _close_server(kill: bool = False) -> None:
    while _SERVER:
        _SERVER.pop().close(kill)


atexit.register(_close_server)


class FreshRuns:
    """Jobs sent to fresh processes now, their outcomes collected later (:meth:`outcomes`), so that
    the asking process works meanwhile: ``run(factory, *args)`` for each ``args`` of ``jobs``.
    ``in_order=False``: each in a fresh process of its own, all at once (a run still going after
    ``timeout`` seconds is ended); ``True``: one after the other in one process, which is ended when
    a job runs ``timeout`` seconds (None: no limit; the next ones go on in a new process).  ``run``
    must be importable by name."""

    def __init__(self, factory_bytes: tuple, run, jobs: list, timeout, in_order: bool = False, max_crashes=None,
                 confined=None):
        data, loader = factory_bytes
        if confined is not None and in_order:
            raise ValueError("confined jobs run each in a process of its own (in_order=False)")
        self.scratch, self.confined = [], confined is not None
        if confined is not None:  # one private scratch directory per job, removed by outcomes()
            import tempfile
            self.scratch = [tempfile.mkdtemp(prefix="study-check-") for _ in jobs]
        from .confine import asker_path  # relative entries absolute: a confined child works elsewhere
        self.jobs = [(asker_path(), data, loader, run, tuple(args),
                      None if confined is None else {**confined, "scratch": scratch})
                     for args, scratch in zip(jobs, self.scratch or [None] * len(jobs))]
        self.mode = "in_order" if in_order else "each"
        self.timeout, self.server, self.result, self.max_crashes = timeout, None, None, max_crashes
        _LOCK.acquire()  # one asker at a time: released by outcomes()
        try:
            if hasattr(os, "fork"):
                if not _SERVER or not _SERVER[0].alive():
                    _close_server()
                    _SERVER.append(_Server())
                self.server = _SERVER[0]
                self.server.send(self.mode, self.jobs, timeout, max_crashes)
        except BaseException:
            _close_server(kill=True)
            _LOCK.release()
            raise

    def outcomes(self) -> list:
        """[(status, value)] in the order of the jobs: ("ok", what ``run`` returned), ("error",
        the exception it raised), ("timeout", message: the process was ended), ("crashed",
        message: the process ended without a result) or ("not_run", message: ``max_crashes`` jobs
        had ended their process)."""
        if self.result is not None:
            return self.result
        try:
            if self.server is not None:
                result = self.server.receive(len(self.jobs), self.timeout, self.confined)
            else:  # no fork: a server (a fresh interpreter) per job
                result = []
                for job in self.jobs:
                    server = _Server()
                    server.send(self.mode, [job], self.timeout, self.max_crashes)
                    result += server.receive(1, self.timeout, self.confined)
                    server.close()
        except BaseException:  # (Ctrl-C) an answer left unread: the next request gets a new server
            _close_server(kill=True)
            self.result = [("crashed", "interrupted")] * len(self.jobs)
            raise
        finally:
            _LOCK.release()
            import shutil
            for scratch in self.scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        self.result = result
        return result


def run_fresh(factory_bytes: tuple, run, jobs: list, timeout: float) -> list:
    """:class:`FreshRuns` started and collected at once."""
    return FreshRuns(factory_bytes, run, jobs, timeout).outcomes()


if __name__ == "__main__":
    serve()
