"""Terminal output of a running study: the progress bar (or lines) and the handling of SIGINT and
SIGTERM."""
from __future__ import annotations

import signal
import sys
import threading
import time


class Progress:
    """tqdm bar on a terminal; otherwise a line every ~10% or 60 s."""

    def __init__(self, study, total, enabled, log):
        self.study, self.total, self.enabled, self.log = study, total, enabled, log
        self.done = self.failed = 0
        self.start = time.monotonic()
        self.last_line = self.start
        self.next_mark = 0.1
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=study, unit="rep", dynamic_ncols=True)

    def update(self, n, failed):
        """``n`` more replications finished, ``failed`` of them failed (0, 0: a heartbeat)."""
        self.done += n
        self.failed += failed
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(failed=self.failed, refresh=False)
            return
        now = time.monotonic()
        frac = self.done / max(1, self.total)
        if ((frac >= self.next_mark and now - self.last_line >= 5) or now - self.last_line >= 60
                or self.done == self.total):
            elapsed = now - self.start
            eta = elapsed / frac - elapsed if frac > 0 else float("nan")
            self.log(f"[{self.study}] {self.done}/{self.total} done, {self.failed} failed, "
                     f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s")
            self.last_line = now
            while self.next_mark <= frac:
                self.next_mark += 0.1

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Interrupts:
    """SIGINT/SIGTERM while a study runs: the first asks the driver to stop (no new tasks, in-flight
    ones cancelled, finished ones written, manifest "interrupted"); later ones are reported and
    otherwise ignored, so the write always completes.  Installed from the main thread only."""

    def __init__(self, study, log, enabled=True):
        self.study, self.log, self.enabled = study, log, enabled
        self.signals, self.old = [], {}

    def _handle(self, signum, frame):
        """Record the signal; say what happens next (stop after writing, or still writing)."""
        self.signals.append(signal.Signals(signum).name)
        if len(self.signals) == 1:
            self.log(f"[{self.study}] {self.signals[0]}: stopping; writing the finished replications "
                     "(another Ctrl-C will not interrupt the write)")
        else:
            self.log(f"[{self.study}] {self.signals[-1]} again: still writing the finished replications; "
                     "stopping as soon as they are on disk")

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    def __enter__(self):
        if self.enabled and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False
