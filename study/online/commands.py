"""The store's administration from the command line: ``python -m study.online judges add|revoke|list
STORE [NAME]``, ``python -m study.online export STORE OUT [--counts]`` and ``python -m
study.online import STORE FILE`` (:mod:`study.online.importing`), ``python -m study.online horizon
STORE T`` (raise the horizon: :mod:`study.online.horizon`), ``python -m study.online items add|retire
STORE NAME`` (:mod:`study.online.items`).

``judges add`` prints the new judge's token once (the store keeps its SHA-256 only); ``judges
revoke`` refuses its token from then on; ``judges list`` prints every judge with its tells;
``judges report`` prints :func:`study.leaderboard.judges.judge_report` of the store's battle log (with
the judging page's log beside it, ``STORE.judging.jsonl``: the pool's question ids, the seconds per
vote and the re-served battles, :mod:`study.online.service.judging_log`).
``export`` writes the battle log (``--counts``: one row per told outcome) that ``python -m
study.leaderboard`` reads (:mod:`study.online.export`).  Exit status 0; 2 with one line for a
missing, foreign or invalid store, a file-system failure, or a refused name.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path


def add_arguments(commands) -> None:
    judges = commands.add_parser("judges", help="name judges (a token each, shown once), revoke them, list them")
    judges.add_argument("action", choices=("add", "revoke", "list", "report"))
    judges.add_argument("file", type=Path, help="the ranker's SQLite store")
    judges.add_argument("name", nargs="?", help="the judge's name (add, revoke)")
    judges.add_argument("--json", action="store_true", help="report: print JSON instead of Markdown")
    export = commands.add_parser("export", help="write the told rows as a battle log study.leaderboard reads")
    export.add_argument("file", type=Path, help="the ranker's SQLite store")
    export.add_argument("out", type=Path, help="the file to write: .parquet, .csv or .jsonl")
    export.add_argument("--counts", action="store_true",
                        help="one row per told outcome (wins_a, wins_b, ties) instead of one per comparison")
    load = commands.add_parser("import", help="import a battle log or judgments file as told rows (evidence, not a "
                                              "prior)")
    load.add_argument("file", type=Path, help="the ranker's SQLite store (existing)")
    load.add_argument("judgments", type=Path, help="CSV, Parquet, JSON or JSON Lines, as study.leaderboard reads")
    load.add_argument("--tie-rule", choices=("half", "drop-bothbad", "drop"), default="half",
                      help="what a tie is (as in study.leaderboard; default half a win each)")
    load.add_argument("--judge", default="auto", help="the judge column (default: 'judge' if present)")
    load.add_argument("--context", default=None, help="a column of context vectors (default: 'context' if present)")
    retire = commands.add_parser("items", help="add an item to a live store, or retire one (never asked again, "
                                               "kept in the table, marked)")
    retire.add_argument("action", choices=("add", "retire"))
    retire.add_argument("file", type=Path, help="the ranker's SQLite store (existing)")
    retire.add_argument("name", help="the item's name")
    raise_ = commands.add_parser("horizon", help="raise the store's horizon T from the next ask on (recorded)")
    raise_.add_argument("file", type=Path, help="the ranker's SQLite store (existing)")
    raise_.add_argument("T", type=int, help="the new horizon (larger than the one in force)")


def _fail(message) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def judges_command(args) -> int:
    from . import judges
    from .ranker import Ranker
    from .store import StoreFileError

    if args.action == "report":
        return judges_report(args)
    if args.action != "list" and not args.name:
        return _fail(f"judges {args.action} needs a NAME")
    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store")
    try:
        with Ranker(args.file, readonly=args.action == "list") as ranker:
            if args.action == "add":
                token = judges.add(ranker, args.name)
                print(f"judge {args.name!r} added; its token (shown this once, the store keeps only its hash):")
                print(token)
            elif args.action == "revoke":
                judges.revoke(ranker, args.name)
                print(f"judge {args.name!r} revoked: its token is refused from now on (its tells stay)")
            else:
                rows = judges.listing(ranker)
                if not rows:
                    print("no judges (every tell is of the store's shared token)")
                for row in rows:
                    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(row["created"]))
                    state = "active" if row["revoked"] is None else \
                        "revoked " + time.strftime("%Y-%m-%d %H:%M", time.gmtime(row["revoked"]))
                    print(f"{row['name']}\t{row['tells']} tells\tadded {when} UTC\t{state}")
    except (ValueError, StoreFileError) as exc:
        return _fail(exc)
    return 0


def judges_report(args) -> int:
    import json

    from ..leaderboard.judges import judge_report
    from .export import battle_rows
    from .service.judging_log import report_rows
    from .service.serve import judging_log
    from .store import StoreFileError

    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store")
    try:
        frame = battle_rows(args.file)
        log = judging_log(args.file)
        if log.is_file():
            frame = report_rows(frame, log)
        report = judge_report(frame)
    except (ValueError, StoreFileError, OSError) as exc:
        return _fail(" ".join(str(exc).split()))
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.to_markdown())
    return 0


def import_command(args) -> int:
    from .importing import import_judgments
    from .ranker import Ranker
    from .store import StoreFileError

    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store (create it with its items first)")
    if not args.judgments.is_file():
        return _fail(f"{args.judgments}: no such file")
    try:
        with Ranker(args.file) as ranker:
            count = import_judgments(ranker, args.judgments, tie_rule=args.tie_rule,
                                     judge=None if args.judge == "none" else args.judge, context=args.context)
            print(f"imported {count} told rows from {args.judgments}: {ranker.n_told} told in all")
    except (ValueError, StoreFileError, OSError) as exc:
        return _fail(exc)
    return 0


def horizon_command(args) -> int:
    from .ranker import Ranker
    from .store import StoreFileError

    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store")
    try:
        with Ranker(args.file) as ranker:
            ranker.extend_horizon(args.T)
            kind = "open, doubling from it" if ranker.config.open_horizon else "the last ask"
            print(f"horizon raised to T = {args.T} from ask {ranker.n_asked + 1} on ({kind})")
    except (ValueError, StoreFileError) as exc:
        return _fail(exc)
    return 0


def items_command(args) -> int:
    from . import items
    from .ranker import Ranker
    from .store import StoreFileError

    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store")
    try:
        with Ranker(args.file) as ranker:
            if args.action == "add":
                index = items.add(ranker, args.name)
                print(f"item {args.name!r} added as item {index}: one side of each of its first "
                      f"{items.newcomer_asks(ranker.config)} asks")
            else:
                step = items.retire(ranker, args.name)
                print(f"item {args.name!r} retired from ask {step} on (its told rows and its row in the table stay)")
    except (ValueError, StoreFileError) as exc:
        return _fail(exc)
    return 0


def export_command(args) -> int:
    from .export import SUFFIXES, battle_rows, export_battles, export_told, write
    from .service.judging_log import with_prompts
    from .service.serve import judging_log
    from .store import StoreFileError

    if args.out.suffix.lower() not in SUFFIXES:
        return _fail(f"{args.out}: export to .parquet, .csv or .jsonl, not {args.out.suffix!r}")
    if not args.file.is_file():
        return _fail(f"{args.file}: no such ranker store")
    try:
        log = judging_log(args.file)
        if args.counts or not log.is_file():
            path = (export_told if args.counts else export_battles)(args.file, args.out)
        else:  # the judging page's log names the pool's question of each ticket
            path = write(with_prompts(battle_rows(args.file), log), args.out)
    except (ValueError, StoreFileError, OSError) as exc:
        return _fail(exc)
    print(f"wrote {path}")
    return 0
