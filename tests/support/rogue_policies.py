"""Policies that misbehave, importable on the Ray workers (tests/support is on their path): one
that hangs, ones that end their process, and one that meddles with what a step hands it.
No tests here.  Each records its attempts (one file per replication attempt) under
:data:`ATTEMPTS`, a directory private to this checkout, so a test can count Ray's retries."""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from study.policies import make_policy

ATTEMPTS = Path(tempfile.gettempdir()) / ("study-rogue-" + hashlib.sha1(str(Path(__file__).resolve()).encode())
                                          .hexdigest()[:12])
CRASH_AT = 3  # the step at which the rogue policies act


def _record(kind: str) -> None:
    ATTEMPTS.mkdir(parents=True, exist_ok=True)
    (ATTEMPTS / f"{kind}-{uuid.uuid4().hex}").touch()


def attempts(kind: str) -> int:
    return len(list(ATTEMPTS.glob(f"{kind}-*"))) if ATTEMPTS.is_dir() else 0


class _Rogue:
    kind = "rogue"
    policy_needs = ("files",)  # the attempt files (the audit hook of user policies refuses undeclared writes)

    def __init__(self, setting):
        self.inner = make_policy("RB", setting)

    def select(self, step):
        if step.t == 1:
            _record(self.kind)
        if step.t == CRASH_AT:
            self.misbehave(step)
        return self.inner.select(step)

    def update(self, step, choice, wins):
        update = getattr(self.inner, "update", None)
        if update is not None:
            update(step, choice, wins)


class Hang(_Rogue):
    """Never returns from step 3 (an endless wait)."""
    kind = "hang"

    def misbehave(self, step):
        while True:
            time.sleep(1.0)


class OsExit(_Rogue):
    """Ends its worker process at step 3 (``os._exit``), as a crash in native code would."""
    kind = "osexit"

    def misbehave(self, step):
        os._exit(3)


class SysExit(_Rogue):
    """Calls ``sys.exit(3)`` at step 3."""
    kind = "sysexit"

    def misbehave(self, step):
        sys.exit(3)


class SwallowsTimeouts(_Rogue):
    """From step 3, retries for ever in a loop that swallows every exception (the issue: a
    time_limit's timeout was caught, the run hung, 1 of 6 replications stored after 90 s)."""
    kind = "swallows"

    def misbehave(self, step):
        while True:
            try:
                time.sleep(0.05)
            except Exception:  # noqa: BLE001 -- the point: it swallows the timeout too
                pass


class CatchesTimeoutOnce(_Rogue):
    """Sleeps past the time limit at step 3, catches the timeout and carries on to the end."""
    kind = "catches"

    def misbehave(self, step):
        try:
            time.sleep(60)
        except Exception:  # noqa: BLE001
            pass


class SwallowsSometimes(SwallowsTimeouts):
    """SwallowsTimeouts in the replications whose first context has a first coordinate above 1,
    RB in the others: a task then mixes hung and finished replications."""
    kind = "sometimes"

    def select(self, step):
        if step.t == 1:
            self.hangs = bool(step.x[0] > 1.0)
        if step.t == CRASH_AT and self.hangs:
            self.misbehave(step)
        return self.inner.select(step)
