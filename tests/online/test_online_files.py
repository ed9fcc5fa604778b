"""Every refusal of the file system is one line naming the file, and the store is left as it was:
a read-only file or directory, a second hard link, a full disk (injected at SQLite's own page
limit, and a real tmpfs filled up where a mount namespace can be made), a file that is not a store.

Permission bits do not stop root: run as root (as on CI), the read-only cases run in a child
process in a private mount namespace where the file or directory is bind-mounted read-only."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from study.online import Ranker, StoreError, StoreFileError

SUPPORT = Path(__file__).resolve().parents[1] / "support"
CHILD = SUPPORT / "online_files_child.py"
NOBODY = 65534


sys.path.insert(0, str(SUPPORT))
from online_child import dump, sha256 as sha  # noqa: E402  (tests/support)


def make_store(path, tells=5):
    with Ranker(path, n_items=3, dim=2, T=50, seed=1) as ranker:
        for k in range(tells):
            ranker.tell(ranker.ask([1.0, 0.1 * k]), k % 2)


def run_child(*args, wrap=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([*wrap, sys.executable, str(CHILD), *map(str, args)], capture_output=True, text=True,
                         timeout=300, env=env)
    if out.returncode != 0:
        return {"failed": out.stderr[-3000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def namespace_available() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-m", "true"],
                                                                  capture_output=True).returncode == 0


def read_only(target: Path):
    """Makes ``target`` (a file or a directory) read-only for the child.  Permission bits stop an
    ordinary user; root ignores them, so as root the child runs in a private mount namespace where
    ``target`` is bind-mounted read-only (a read-only file system, which stops root too)."""
    if os.geteuid() != 0:
        target.chmod(0o555 if target.is_dir() else 0o444)
        return lambda *args: run_child(*args)
    if not namespace_available():
        pytest.skip("running as root without mount namespaces: no way to make a file read-only for root")
    script = f"mount --bind '{target}' '{target}' && mount -o remount,ro,bind '{target}' '{target}' && exec \"$@\""
    return lambda *args: run_child(*args, wrap=("unshare", "-m", "sh", "-c", script, "sh"))


def one_line_naming(result, path, *fragments):
    assert "error" in result, result
    message = result["message"]
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_read_only_file_is_refused_for_writing_and_read(tmp_path):
    path = tmp_path / "r.sqlite"
    make_store(path)
    before = sha(path)
    child = read_only(path)
    result = child("open", path)
    assert result.get("error") == "StoreFileError", result
    one_line_naming(result, path, "the file is read-only", "readonly=True")
    assert child("open", path, "readonly") == {"ok": 5}
    shown = child("show", path)
    assert shown["rc"] == 0 and "told 5" in shown["stdout"], shown
    assert sha(path) == before


def test_a_read_only_directory_is_refused_for_writing_and_creating(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "r.sqlite"
    make_store(path)
    before = sha(path)
    child = read_only(folder)
    result = child("open", path)
    one_line_naming(result, path, "directory", "read-only")
    assert child("open", path, "readonly") == {"ok": 5}
    shown = child("show", path)
    assert shown["rc"] == 0 and "told 5" in shown["stdout"], shown
    created = child("create", folder / "new.sqlite")
    one_line_naming(created, folder / "new.sqlite", "cannot create", "read-only")
    assert not (folder / "new.sqlite").exists() and sha(path) == before
    folder.chmod(0o755)


def test_a_second_hard_link_is_refused(tmp_path):
    path, link = tmp_path / "r.sqlite", tmp_path / "link.sqlite"
    make_store(path)
    os.link(path, link)
    before = sha(path)
    for name in (path, link):
        for readonly in (False, True):
            with pytest.raises(StoreFileError) as refused:
                Ranker(name, readonly=readonly)
            message = str(refused.value)
            assert message.startswith(f"{name}: the file has 2 hard links") and "\n" not in message
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(link)], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 2 and "hard links" in shown.stderr and len(shown.stderr.splitlines()) == 1
    os.unlink(link)
    assert sha(path) == before and Ranker(path, readonly=True).n_told == 5


def test_a_full_disk_is_one_line_and_loses_nothing(tmp_path):
    """The disk full, injected at the lowest layer: SQLite's page limit (PRAGMA max_page_count),
    so that SQLite itself reports SQLITE_FULL ("database or disk is full") on writing.  The failed
    operation leaves nothing; with space again the ranker goes on, and ends where a ranker that
    never met a full disk ends after the same successful calls."""
    path = tmp_path / "r.sqlite"
    make_store(path)
    ranker = Ranker(path)
    done = []  # the calls that succeeded, in order: ("ask", x) or ("tell", ticket id, wins)
    conn = ranker._store.conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(StoreFileError) as full:
        for k in range(200):
            before, theta = dump(path), ranker.theta
            x = [1.0, np.cos(k)]
            ticket = ranker.ask(x)
            done.append(("ask", x))
            before, theta = dump(path), ranker.theta
            ranker.tell(ticket, k % 2)
            done.append(("tell", ticket.id, k % 2))
    message = str(full.value)
    assert message.startswith(f"{path}: the disk is full") and "\n" not in message and "left as it was" in message
    assert dump(path) == before  # nothing of the failed operation
    np.testing.assert_array_equal(ranker.theta, theta)
    conn.execute("PRAGMA max_page_count = 1073741823")  # space again: the ranker goes on
    for _ in range(3):
        ticket = ranker.ask([1.0, -0.5])
        done.append(("ask", [1.0, -0.5]))
        ranker.tell(ticket, 1)
        done.append(("tell", ticket.id, 1))
    make_store(tmp_path / "u.sqlite")
    with Ranker(tmp_path / "u.sqlite") as uninterrupted:
        for call in done:
            if call[0] == "ask":
                uninterrupted.ask(call[1])
            else:
                uninterrupted.tell(call[1], call[2])
        np.testing.assert_array_equal(uninterrupted.theta, ranker.theta)
    ranker.close()


def test_a_really_full_disk(tmp_path):
    """A 2 MB tmpfs (in a private mount namespace), nearly filled by a ballast file: the ranker tells
    until the disk is full, gets one line naming the file, keeps every acknowledged tell (the store
    verifies), and tells on once the ballast is removed."""
    if not namespace_available():
        pytest.skip("cannot make a mount namespace here (unshare -m)")
    mount = tmp_path / "tiny"
    mount.mkdir()
    store, ballast = mount / "r.sqlite", mount / "ballast"
    script = (f"mount -t tmpfs -o size=2m tmpfs {mount} && head -c 1200000 /dev/zero > {ballast} && "
              f"exec \"$@\"")
    result = run_child("fill", store, ballast, wrap=("unshare", "-m", "sh", "-c", script, "sh"))
    if "failed" in result and "mount" in result["failed"]:
        pytest.skip(f"cannot mount a tmpfs here: {result['failed'][-200:]}")
    assert "failed" not in result, result
    failure = result["failure"]
    assert failure["error"] == "StoreFileError", failure
    assert failure["message"].startswith(f"{store}: the disk is full") and "\n" not in failure["message"]
    assert result["told"] > 5 and result["kept"] == result["told"] and result["same_theta"]
    assert result["verified"] == {"ok": result["told"]}
    assert result["after"] == result["told"] + len(result["pending"]) + 1


def test_files_that_are_not_stores_are_refused_in_one_line(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    empty = tmp_path / "empty.sqlite"
    with sqlite3.connect(empty) as conn:
        conn.execute("PRAGMA user_version = 1")
    cases = [(text, False, StoreError, "not a ranker store (not an SQLite database)"),
             (other, True, StoreError, "an SQLite file, but not a ranker store (no meta table)"),
             (empty, True, StoreError, "an empty SQLite file, not a ranker store"),
             (tmp_path, True, StoreError, "is a directory"),
             (tmp_path / "missing.sqlite", True, StoreError, "no such ranker store"),
             (tmp_path / "no" / "dir.sqlite", False, StoreFileError, "cannot create the store: no directory")]
    for path, readonly, kind, message in cases:
        before = sha(path) if path.is_file() else None
        with pytest.raises(kind) as refused:
            Ranker(path, readonly=readonly, **({} if readonly else {"n_items": 3, "dim": 2}))
        assert str(refused.value) == f"{path}: {message}" or str(refused.value).startswith(f"{path}: {message}")
        assert before is None or sha(path) == before
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(text)], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 2 and shown.stderr.strip() == f"error: {text}: not a ranker store (not an SQLite database)"
    assert stat.S_ISREG(text.stat().st_mode)
