"""A user policy whose module's top-level code leaves a trace wherever it runs (an environment
variable, a marker file): the driver and the workers must never import it, only the confined
processes that run or describe it (where the kernel refuses the marker's write).  No tests here."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from study.policies import make_policy

FLAG = "STUDY_TOPLEVEL_POLICY_RAN"
# not tempfile.gettempdir(), which probes by writing (refused, and so failing, in a confined process)
MARKER = Path(os.environ.get("TMPDIR") or "/tmp") / ("study-toplevel-" + hashlib.sha1(str(Path(__file__).resolve()).encode())
                                        .hexdigest()[:12])
os.environ[FLAG] = str(os.getpid())
try:
    MARKER.write_text(str(os.getpid()))
except OSError:  # refused by the kernel in a confined process
    pass


class Clean:
    """RB's rule."""

    def __init__(self, setting):
        self.inner = make_policy("RB", setting)

    def select(self, step):
        return self.inner.select(step)
