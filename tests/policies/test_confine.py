"""The kernel's confinement of a policy's process (study.policies.confine), applied in a forked
child: the output directory is cut out of the readable trees even beneath a directory of sys.path,
writes go only to the scratch directory, and a declared need lifts exactly its rule."""
from __future__ import annotations

import os
import socket
import sys

import pytest

from study.policies import confine

pytestmark = pytest.mark.skipif(not confine.status()["available"], reason="no kernel confinement here")


def in_confined_child(scratch, needs, hidden, probe) -> dict:
    """{name: "ok" or the exception's name} of each probe, run in a child confined as a policy."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            confine.confine(str(scratch), frozenset(needs), [str(h) for h in hidden])
            results = {}
            for name, call in probe.items():
                try:
                    call()
                    results[name] = "ok"
                except (OSError, RuntimeError) as exc:
                    results[name] = type(exc).__name__
            os.write(write, repr(results).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    import ast
    return ast.literal_eval(data.decode())


def test_the_output_directory_is_cut_out_of_a_readable_tree(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    out, sibling = root / "outputs" / "study", root / "outputs" / "other.txt"
    out.mkdir(parents=True)
    (out / "part.parquet").write_bytes(b"x")
    sibling.write_text("y")
    (root / "module.py").write_text("z")
    monkeypatch.setattr(sys, "path", [str(root), *sys.path])
    roots = confine.readable_roots([out])
    assert str(root) not in roots and str(root / "module.py") in roots and str(sibling) in roots
    assert not any(r == str(out) or r.startswith(str(out) + os.sep) for r in roots)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = in_confined_child(scratch, (), [out], {
        "read module": lambda: open(root / "module.py").read(),
        "read sibling": lambda: open(sibling).read(),
        "read part": lambda: open(out / "part.parquet", "rb").read(),
        "list out": lambda: os.listdir(out),
        "write scratch": lambda: open(scratch / "ok", "w").close(),
        "write beside": lambda: open(root / "planted", "w").close(),
        "socket": lambda: socket.socket().close(),
        "fork": lambda: os._exit(0) if os.fork() == 0 else None,
    })
    assert got == {"read module": "ok", "read sibling": "ok", "read part": "PermissionError",
                   "list out": "PermissionError", "write scratch": "ok", "write beside": "PermissionError",
                   "socket": "PermissionError", "fork": "PermissionError"}
    assert not (root / "planted").exists()


def test_a_declared_need_lifts_its_rule_only(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = in_confined_child(scratch, ("sockets",), [], {
        "socket": lambda: socket.socket().close(),
        "write outside": lambda: open(tmp_path / "planted", "w").close(),
    })
    assert got == {"socket": "ok", "write outside": "PermissionError"}


def test_a_link_to_the_outputs_in_the_working_directory_grants_nothing(tmp_path, monkeypatch):
    """Run from a working directory that holds --out (on sys.path, as a relative entry made
    absolute) and links to it or to a folder above it (as pytest's ``*current`` links are): the
    outputs stay unreadable by every path, their siblings readable."""
    cwd = tmp_path / "work"
    out = cwd / "outputs" / "study"
    out.mkdir(parents=True)
    (out / "part.parquet").write_bytes(b"x")
    (cwd / "outputs" / "other.txt").write_text("y")
    (cwd / "latest").symlink_to(cwd / "outputs")
    (cwd / "to-out").symlink_to(out)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [str(cwd), *sys.path])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = in_confined_child(scratch, (), [out], {
        "read part": lambda: open(out / "part.parquet", "rb").read(),
        "list out": lambda: os.listdir(out),
        "part by a link above": lambda: open(cwd / "latest" / "study" / "part.parquet", "rb").read(),
        "part by a link": lambda: open(cwd / "to-out" / "part.parquet", "rb").read(),
        "sibling by a link above": lambda: open(cwd / "latest" / "other.txt").read(),
        "sibling": lambda: open("outputs/other.txt").read(),
    })
    assert got == {"read part": "PermissionError", "list out": "PermissionError",
                   "part by a link above": "PermissionError", "part by a link": "PermissionError",
                   "sibling by a link above": "ok", "sibling": "ok"}


def reporting_child(tmp_path, body):
    """Fork a child confined with ``report``: it hands its filter's listener to this process over a
    socket pair and closes its copy, then runs ``body(write, held)`` and exits (``write``: a pipe to
    this process; ``held``: whether the probe found the listener among its descriptors before the
    hand-over).  Returns the child's pid, the listener and the pipe's read end."""
    from evilpol.kernel import listeners

    from study.policies import refusals

    ours, theirs = socket.socketpair()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            applied = confine.confine(str(tmp_path), report=True)
            held = applied["listener"] in listeners()
            socket.send_fds(theirs, [b"L"], [applied["listener"]])
            os.close(applied["listener"])
            theirs.close()
            body(write, held)
        finally:
            os._exit(0)
    os.close(write)
    theirs.close()
    return pid, refusals.receive(ours, 30), read


@pytest.mark.skipif(not confine.status()["refusals_reported"], reason="refusals are not reported on this machine")
def test_the_listener_sees_each_refusal_the_child_catches_and_leaves_it(tmp_path):
    """A child confined with ``report`` hands its filter's listener over and keeps no copy (the
    probe that finds it before finds nothing after); each socket it then tries, and catches, is
    refused with EPERM by the parent's RefusalWatch, which names and counts them; the watch ends
    when the child does."""
    import errno

    from evilpol.kernel import listeners

    from study.policies import refusals

    def body(write, held):
        after = listeners()
        caught = []
        for _ in range(2):
            try:
                socket.socket()
            except OSError as exc:
                caught.append(exc.errno)
        os.write(write, repr((held, after, caught)).encode())

    pid, listener, read = reporting_child(tmp_path, body)
    watch = refusals.RefusalWatch(listener, "probe")
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    import ast
    held, after, caught = ast.literal_eval(data.decode())
    assert held and after == [] and caught == [errno.EPERM] * 2
    assert watch.refused == [("socket", pid)] * 2 and watch.describe() == "socket (2 times)"
    watch.join(5)
    assert not watch._thread.is_alive()


def test_a_failed_listener_is_a_refusal():
    """Should the watch's thread fail, the failure counts as a refusal: the policy's later calls
    would otherwise fail unseen (ENOSYS once the listener is closed).  A pipe with data is ready to
    read but no listener (ENOTTY)."""
    from study.policies import refusals

    read, write = os.pipe()
    os.write(write, b"x")
    watch = refusals.RefusalWatch(read, "pipe")
    watch.join(5)
    os.close(write)
    assert not watch._thread.is_alive() and len(watch.refused) == 1
    assert watch.describe().startswith("(the refusals' listener failed: OSError: [Errno 25]")


@pytest.mark.skipif(not confine.status()["refusals_reported"], reason="refusals are not reported on this machine")
def test_settle_puts_a_refusal_still_waiting_on_record(tmp_path):
    """A refusal the kernel holds for the watch (made, not yet received) would be withdrawn when
    the replication's end ends the policy's process: ``settle`` answers and records it.  The watch's
    thread is not started here, so the refusal waits until settle takes it."""
    import errno
    import select
    import time

    from study.policies import refusals

    def body(write, held):
        try:
            socket.socket()
            os.write(write, b"not refused")
        except OSError as exc:
            os.write(write, str(exc.errno).encode())

    pid, listener, read = reporting_child(tmp_path, body)
    try:
        watch = refusals.RefusalWatch(listener, "probe", start=False)
        poller = select.poll()
        poller.register(watch.fd, select.POLLIN)
        deadline = time.monotonic() + 30
        while not any(mask & select.POLLIN for _, mask in poller.poll(100)) and time.monotonic() < deadline:
            pass
        assert watch.refused == []  # the child waits in socket(), its refusal not received
        watch.settle()
        assert watch.refused == [("socket", pid)]
        assert os.read(read, 100) == str(errno.EPERM).encode()
        watch.settle()  # nothing waits now: nothing more on record
        assert watch.refused == [("socket", pid)]
        watch.stop()
        assert watch._closed
    finally:
        os.close(read)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def test_the_listener_requests_are_linux_generic_iowr_of_the_structs_read_and_written():
    """The two ``ioctl`` request numbers are _IOWR('!', nr, struct) in Linux's generic encoding
    (direction << 30 | size << 16 | type << 8 | nr) for the structs the watch packs: so on every
    architecture of ``ARCHITECTURES`` (generic encoding, 64-bit seccomp_data) they hold, not on x86-64
    alone; struct seccomp_notif is 80 bytes, seccomp_notif_resp 24 (linux/seccomp.h)."""
    from study.policies import refusals

    def iowr(nr, size):
        return (3 << 30) | (size << 16) | (ord("!") << 8) | nr

    assert refusals._NOTIFICATION.size == 80 and refusals._RESPONSE.size == 24
    assert refusals._RECV == iowr(0, refusals._NOTIFICATION.size)
    assert refusals._SEND == iowr(1, refusals._RESPONSE.size)
