"""A process that meets the file system's refusals, for tests/online/test_online_files.py (run as an
unprivileged user when the tests run as root, whom permission bits do not stop; or inside a mount
namespace holding a tiny tmpfs, for a disk that is really full).  Prints one JSON line.

    python online_files_child.py open PATH [readonly]   {"ok": n_told} or {"error": type, "message": ...}
    python online_files_child.py create PATH            the same, creating a store (n = 3, d = 2)
    python online_files_child.py show PATH              {"rc": exit status, "stdout": ..., "stderr": ...}
    python online_files_child.py fill PATH BALLAST      tell until the disk is full, free BALLAST, tell on
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys

import numpy as np


def attempt(call):
    try:
        return {"ok": call()}
    except Exception as exc:  # noqa: BLE001 -- the type and message are the result
        return {"error": type(exc).__name__, "message": str(exc)}


def fill(path, ballast):
    """Tell until the disk is full; then the store must hold every acknowledged tell, verify, and
    take tells again once space is freed."""
    from study.online import Ranker, verify_store

    ranker = Ranker(path, n_items=3, dim=2, T=100_000, seed=1)
    told, failure = 0, None
    while failure is None and told < 100_000:
        try:
            ranker.tell(ranker.ask(np.array([1.0, np.sin(told)])), told % 2)
            told += 1
        except Exception as exc:  # noqa: BLE001
            failure = {"error": type(exc).__name__, "message": str(exc)}
    theta = ranker.theta
    ranker.close()
    reader = Ranker(path, readonly=True)
    kept = reader.n_told
    same = bool(np.array_equal(reader.theta, theta))
    reader.close()
    verified = attempt(lambda: verify_store(path)["counts"]["told"])
    os.remove(ballast)
    again = Ranker(path)
    pending = [t.id for t in again.pending()]
    for ticket in again.pending():
        again.tell(ticket, 1)
    again.tell(again.ask([1.0, 0.0]), 0)
    result = {"told": told, "failure": failure, "kept": kept, "same_theta": same, "verified": verified,
              "pending": pending, "after": again.n_told}
    again.close()
    return result


def main(argv):
    command, path = argv[0], argv[1]
    from study.online import Ranker

    if command == "open":
        readonly = len(argv) > 2
        result = attempt(lambda: Ranker(path, readonly=readonly).n_told)
    elif command == "create":
        result = attempt(lambda: Ranker(path, n_items=3, dim=2, seed=1).n_told)
    elif command == "show":
        from study.online.__main__ import main as online

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = online(["show", path, "--no-png"])
        result = {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}
    elif command == "fill":
        result = fill(path, argv[2])
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
