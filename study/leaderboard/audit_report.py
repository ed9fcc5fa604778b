"""The board audit (:mod:`.audit`) as a section of the report (Markdown) and as JSON."""
from __future__ import annotations

import json
import math

from .audit import Audit
from .output import plain


def _status(probe) -> str:
    return "n/a" if probe.fired is None else ("**FIRES**" if probe.fired else "silent")


def _number(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:.3g}"


def markdown(audit: Audit) -> str:
    """The audit section: one row per probe (its question, result, statistic, p-value, finding),
    then the tests."""
    fired = audit.fired
    lines = ["## Board audit", "",
             (f"{len(fired)} of {len(audit.probes)} probes fire: {', '.join(fired)}." if fired else
              f"No probe fires ({len(audit.probes)} probes)."),
             f"Each probe is a stated test at level {audit.alpha:g} (or a stated rule); false-alarm rates on clean "
             "simulated boards and power on planted ones: docs/leaderboard.md#a-board-audit.", "",
             "| probe | question | result | statistic | p | finding |", "|---|---|---|---:|---:|---|"]
    for p in audit.probes:
        finding = p.finding.replace("|", "\\|")
        lines.append(f"| {p.name} | {p.question} | {_status(p)} | {_number(p.statistic)} | {_number(p.p_value)} | "
                     f"{finding} |")
    lines += ["", "Tests:", ""] + [f"* {p.name}: {p.test}." for p in audit.probes]
    return "\n".join(lines) + "\n"


def as_json(audit: Audit) -> str:
    """{"audit": {"source", "alpha", "fired", "probes": [{name, question, test, fired, statistic,
    p_value, finding, values}]}}."""
    probes = [plain({"name": p.name, "question": p.question, "test": p.test, "fired": p.fired,
                      "statistic": p.statistic, "p_value": p.p_value, "finding": p.finding, "values": p.values})
              for p in audit.probes]
    return json.dumps({"audit": {"source": audit.source, "alpha": audit.alpha, "fired": audit.fired,
                                 "probes": probes}}, indent=1) + "\n"
