"""``python -m study.results verify OUT [STUDY ...]``, ``python -m study.results drop-damaged OUT STUDY``,
``python -m study.results compare OUT [--reference NAME] [--against OTHER_OUT]``
``python -m study.results failures OUT [STUDY ...]`` and ``python -m study.results costs OUT [STUDY ...]``:
check a study directory's parts against their checksums, set the damaged batches aside so that
rerunning the study's command recomputes them, print the stored tracebacks of failed
replications, or what the replications cost (:mod:`.costs`: per cell, its median and its tail).  ``python -m study.results verdicts
OUT`` writes the verdict table of the baselines comparison (:mod:`.verdicts`) to OUT/verdicts.md
and .csv; ``compare`` prints the paired differences of every method of any study from a reference
method (default RB), or of one run against another of the same seeds (:mod:`.compare`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import compare
from .costs import cost_summary, format_costs
from .errors import RECOVERY_COMMAND, StorageError, recovery_hint
from .files import COMMITS
from .storage import drop_damaged, load, verify
from .verdicts import CLAIMS, WARMUP_STUDIES, Z, write_verdicts


def _studies_in(out: Path) -> list:
    return sorted(p.name for p in out.iterdir() if (p / "_manifest.json").exists() or (p / COMMITS).is_dir()) \
        if out.is_dir() else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=RECOVERY_COMMAND,
        description="Check a study directory's parts against their checksums, or drop the damaged "
                    "ones so that rerunning the study's command recomputes them.")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check every part of every (or the named) study; exit 1 if any is damaged "
                                      "or there is no study to check")
    v.add_argument("out")
    v.add_argument("studies", nargs="*")
    d = sub.add_parser("drop-damaged", help="move damaged batches to <study>/_damaged/ (then rerun the command)")
    d.add_argument("out")
    d.add_argument("study")
    w = sub.add_parser("verdicts", help="write OUT/verdicts.md and .csv: paired differences per warm-up, and the "
                                        "verdicts that hold under every warm-up")
    w.add_argument("out")
    w.add_argument("--studies", nargs="+", default=None, metavar="STUDY",
                   help="the studies to compare; those of one warm-up are pooled (A and B with the replay) "
                        f"(default: those of {' '.join(WARMUP_STUDIES)} that are stored)")
    w.add_argument("--z", type=float, default=Z, help=f"paired SEs a winner must lead by (default {Z:g})")
    w.add_argument("--pairs", nargs="+", metavar="A:B", default=[f"{a}:{b}" for a, b in CLAIMS],
                   help="pairs of methods to compare (default: the README's claims)")
    p = sub.add_parser("compare", help="print each method's paired difference from a reference method (R(T), pair "
                                       "R(T), relative error, CP at t = T, with paired SEs), for every (or the named) "
                                       "study; or, with --against, each method's difference from another run")
    p.add_argument("out")
    p.add_argument("studies", nargs="*")
    p.add_argument("--reference", default=compare.REFERENCE, metavar="NAME",
                   help=f"the method every other is compared with (default {compare.REFERENCE})")
    p.add_argument("--against", default=None, metavar="OTHER_OUT",
                   help="another results directory of the same seeds (e.g. the same job under another --set): "
                        "pair each method's replications across the two runs instead")
    p.add_argument("--z", type=float, default=Z, help=f"paired SEs a difference must exceed to be stated (default {Z:g})")
    f = sub.add_parser("failures", help="print the failed replications of every (or the named) study, with their "
                                        "tracebacks (the next run of the study's command retries them)")
    f.add_argument("out")
    f.add_argument("studies", nargs="*")
    f.add_argument("--limit", type=int, default=20, metavar="N", help="print at most N per study (default: 20)")
    c = sub.add_parser("costs", help="print what the replications of every (or the named) study cost: CPU seconds "
                                     "per cell (median, 90th percentile, max, max / median) and by estimator regime")
    c.add_argument("out")
    c.add_argument("studies", nargs="*")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.is_dir():
        parser.error(f"{out} is not a directory")
    try:
        if args.command == "compare":
            return _compare(parser, out, args)
        if args.command == "verdicts":
            stored = _studies_in(out)
            studies = args.studies or [s for s in WARMUP_STUDIES if s in stored]
            missing = [s for s in studies if s not in stored]
            if missing:
                print(f"error: {out} holds no study {missing} (run jobs/baselines.py first)", file=sys.stderr)
                return 2
            pairs = [tuple(p.split(":", 1)) for p in args.pairs]
            if any(len(p) != 2 or not all(p) for p in pairs):
                parser.error(f"--pairs takes METHOD:METHOD, got {args.pairs}")
            written = write_verdicts(out, studies, args.z, pairs)
            if not written:
                print(f"error: the studies {studies} of {out} do not cover two warm-ups: no verdict (run "
                      f"jobs/baselines.py); for the paired differences of any study: python -m study.results compare "
                      f"{out}", file=sys.stderr)
                return 2
            for path in written:
                print(f"wrote {path}")
            print((out / "verdicts.md").read_text())
            return 0
        if args.command == "failures":
            return print_failures(out, args.studies or _studies_in(out), args.limit)
        if args.command == "costs":
            for study in args.studies or _studies_in(out):
                print(format_costs(study, cost_summary(out, study)))
            return 0
        if args.command == "drop-damaged":
            lost = drop_damaged(out, args.study)
            print(f"{args.study}: {lost} replications to recompute; rerun the study's command")
            return 0
        status = 0
        studies = args.studies or _studies_in(out)
        if not studies:
            print(f"{out}: no stored study to verify (a study is a folder holding _manifest.json or {COMMITS}/; "
                  "a job's --out holds one per study it ran)", file=sys.stderr)
            return 1
        total = 0
        for study in studies:
            report = verify(out, study)
            total += report["replications"]
            bad = report["damaged"] or report["duplicates"] or report["foreign"]
            print(f"{study}: {report['commits']} batches, {report['replications']} replications, "
                  f"{len(report['damaged'])} damaged files, {len(report['duplicates'])} duplicated keys, "
                  f"{len(report['foreign'])} parts of no run, "
                  f"{len(report['uncommitted'])} uncommitted parts" + ("" if bad else ": ok"))
            for path, reason, _, n in report["damaged"]:
                print(f"  damaged: {path}: {reason} ({n} replications)")
            for path, reason in report["foreign"]:
                print(f"  damaged: {path}: {reason}")
            for key, a, b in report["duplicates"][:10]:
                print(f"  duplicate: {'/'.join(map(str, key))} in {a} and {b}")
            if bad:
                print(f"  to recover: {recovery_hint(out, study)}")
                status = 1
        print(f"checked {len(studies)} {'study' if len(studies) == 1 else 'studies'} in {out} ({total} replications): "
              + ("every part matches its commit record's size, SHA-256, rows and keys, and every record and part "
                 "belongs to a run of the study's manifest" if status == 0 else "damage found, see above"))
        return status
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _compare(parser, out: Path, args) -> int:
    stored = _studies_in(out)
    missing = [s for s in args.studies if s not in stored]
    if missing or not stored:
        print(f"error: {out} holds " + (f"no study {', '.join(missing)} (it holds: {', '.join(stored)})" if stored
                                         else "no stored study (a job's --out holds one folder per study)"),
              file=sys.stderr)
        return 2
    if args.against is not None and not Path(args.against).is_dir():
        parser.error(f"{args.against} is not a directory")
    try:
        text = (compare.across_markdown(out, args.against, args.z, args.studies or None) if args.against
                else compare.to_markdown(out, args.reference, args.z, args.studies or None))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


def print_failures(out: Path, studies, limit: int = 20) -> int:
    """Print the stored failures of ``studies`` (each with its traceback); 0 if there are none, 1 otherwise."""
    total = 0
    for study in studies:
        failures = load(out, study, "failures")
        total += len(failures)
        print(f"{study}: {len(failures)} failed replications" + ("" if len(failures) else ": none"))
        for row in failures.head(max(limit, 0)).itertuples():
            print(f"\n--- {row.setting}/{row.method}/M={row.M} rep={row.rep} seed={row.seed} (run {row.run_id}): "
                  f"{row.error}")
            print(str(row.traceback).rstrip())
        if len(failures) > limit:
            print(f"\n... and {len(failures) - limit} more (--limit N)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
