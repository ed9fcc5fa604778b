"""The kernel's refusals, seen by the trusted side: a seccomp user-notification listener.

A policy that catches the ``PermissionError`` of a refused call and goes on would leave no trace
of it: the audit hooks are in its own process (it can switch them off) and Landlock's denials are
not reported before kernel 6.15's audit records.  So the policy's process loads its seccomp filter
with each refused call as a *notification* (``SECCOMP_RET_USER_NOTIF``) instead of an error, and,
before any of the policy's code is imported, hands the filter's listener (a file descriptor) to the
trusted process over a socket and closes its own copy.  From then on every refused call waits in
the kernel until :class:`RefusalWatch`, a thread of the trusted process, has recorded it and
answered ``EPERM``: the policy sees the same ``PermissionError`` as before, and cannot hide that
it asked (the listener is nowhere in its process; ``pidfd_getfd`` and ``ptrace`` are refused).

The watch records before it answers, so a refusal made while the trusted side waits for an answer
is on record by the time that answer arrives (:meth:`sandbox.RemotePolicy.select` checks); at the
end of a replication, before the policy's process is ended (which withdraws a refusal not yet
received), :meth:`RefusalWatch.settle` puts on record one still waiting
(:meth:`sandbox.ConfinedFactory.late_refusal`: a thread the policy declared may call after its last
answer).  The
kernel interface is ``seccomp_unotify(2)``: two ``ioctl`` calls on the listener, whose request
numbers below are those of the architectures where ``_IOWR`` has the generic encoding
(:data:`ARCHITECTURES`); elsewhere the filter refuses with ``EPERM`` directly and refusals the
policy catches are not reported (``confine.status()["refusals_reported"]``).
"""
from __future__ import annotations

import errno
import fcntl
import os
import platform
import select
import struct
import threading

ARCHITECTURES = ("x86_64", "aarch64", "arm64", "riscv64", "s390x")  # generic _IOC encoding (tested on x86_64)
# linux/seccomp.h: SECCOMP_IOWR(0, struct seccomp_notif), SECCOMP_IOWR(1, struct seccomp_notif_resp)
_RECV, _SEND = 0xC0502100, 0xC0182101
_NOTIFICATION = struct.Struct("=QIIiIQ6Q")  # id, pid, flags; seccomp_data: nr, arch, ip, args[6]
_RESPONSE = struct.Struct("=QqiI")  # id, val, error, flags
KEPT = 100  # refusals kept one by one (a policy refused in a loop is counted, not listed)
POLL_SECONDS = 0.5  # how long after :meth:`RefusalWatch.stop` the thread may linger


def supported() -> bool:
    """Whether this architecture's request numbers are the ones above."""
    return platform.machine() in ARCHITECTURES


class RefusalWatch:
    """Answer and record every call the policy's filter refers to the listener ``fd`` (owned from
    here on: closed by the thread when the policy's processes are gone or :meth:`stop` is called).

    ``refused`` lists ``(system call name, pid)`` in the order the calls were made (the first
    :data:`KEPT`; ``counts`` counts them all by name).  Should the thread fail, its error is
    counted as a refusal: after it, the filter's calls would fail unseen (``ENOSYS``)."""

    def __init__(self, fd: int, method: str = "", start: bool = True):
        self.fd, self.method, self.refused, self.counts = fd, method, [], {}
        self._stopping, self._lock, self._closed = threading.Event(), threading.Lock(), False
        self._thread = threading.Thread(target=self._run, name=f"refusals of {method}", daemon=True)
        self._started = bool(start)
        if start:  # False: only :meth:`settle` answers (a test's way to hold a refusal pending)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if not self._started:
            self._close()

    def settle(self) -> None:
        """Put on record a refusal still waiting in the kernel (made, not yet received by the
        thread): called at the end of a replication, before its process is ended (which would
        withdraw it).  The thread receives and records under the same lock, so after this ``refused``
        holds a call if the policy's processes made one before it: one waiting is answered here."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)  # polled only while the listener is open (_answer_waiting)
        try:
            self._answer_waiting(poller, bytearray(_NOTIFICATION.size))
        except OSError as exc:
            self._failed(exc)

    def join(self, timeout=None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        buffer = bytearray(_NOTIFICATION.size)
        try:
            while not self._stopping.is_set():
                events = poller.poll(POLL_SECONDS * 1000)
                if not events:
                    continue
                mask = events[0][1]
                if mask & select.POLLIN:
                    self._answer_waiting(poller, buffer)
                elif mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    return  # every process under the filter has ended
        except BaseException as exc:  # noqa: BLE001 -- the replication must not go on unwatched
            self._failed(exc)
        finally:
            self._close()

    def _answer_waiting(self, poller, buffer: bytearray) -> None:
        """Answer a refusal that is waiting, received and recorded as one under the lock (the
        thread's and :meth:`settle`'s: the other may have taken it, and receiving on an empty
        listener would block)."""
        with self._lock:
            if not self._closed and any(mask & select.POLLIN for _, mask in poller.poll(0)):
                self._answer(buffer)

    def _close(self) -> None:
        with self._lock:
            if not self._closed:
                os.close(self.fd)
                self._closed = True

    def _failed(self, exc: BaseException) -> None:
        self._record(f"(the refusals' listener failed: {type(exc).__name__}: {exc})", 0)

    def _record(self, name: str, pid: int) -> None:
        if len(self.refused) < KEPT:
            self.refused.append((name, pid))
        self.counts[name] = self.counts.get(name, 0) + 1

    def _answer(self, buffer: bytearray) -> None:
        buffer[:] = bytes(len(buffer))  # the kernel refuses a request that is not zeroed
        try:
            fcntl.ioctl(self.fd, _RECV, buffer, True)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EINTR):  # the caller died (or the wait was interrupted)
                return
            raise
        ident, pid, _flags, number, arch, _ip, *_args = _NOTIFICATION.unpack(buffer)
        self._record(_name(arch, number), pid)
        try:
            fcntl.ioctl(self.fd, _SEND, bytearray(_RESPONSE.pack(ident, 0, -errno.EPERM, 0)), True)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the caller died meanwhile
                raise

    def describe(self) -> str:
        """The refusals, for a failure's message: ``socket (3 times), clone``."""
        counts = dict(self.counts)
        return ", ".join(name if n == 1 else f"{name} ({n} times)" for name, n in counts.items())


def _name(arch: int, number: int) -> str:
    try:
        import pyseccomp
        name = pyseccomp.resolve_syscall(arch, number)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 -- a number libseccomp cannot name is still a refusal
        return f"system call {number}"


def receive(hand, seconds: float | None = None):
    """The listener the policy's process sends on the socket ``hand`` (closed here), or None where
    it sends none (not confined, or confinement failed: its own message says why)."""
    import socket
    try:
        hand.settimeout(seconds)
        _, fds, _, _ = socket.recv_fds(hand, 1, 1)
    except OSError:  # a timeout included: the policy's process is then ended by the caller's watchdog
        return None
    finally:
        hand.close()
    return fds[0] if fds else None


__all__ = ["RefusalWatch", "receive", "supported"]
