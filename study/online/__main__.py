"""``python -m study.online show FILE`` and ``python -m study.online verify FILE``: what a
ranker's store holds, and whether it is one to trust, without changing it; ``python -m
study.online serve FILE``: the ranker as a service (:mod:`study.online.service.serve`); ``judges``,
``export``, ``import``, ``horizon`` and ``items``: :mod:`study.online.commands`.

``show`` prints the ranker's arguments, its counts (asked, told, open, expired; comparisons and
ties), the current ranking with CIs (``--anytime``: confidence sequences) at the mean told context
and the stopping rule's verdict (is the top item, or the top ``--top`` k, separated from the rest
by the confidence sequences?), and draws the ranking diagram over the told contexts as a PNG
(uncertainty-aware while the CIs exist, the point version before).  It reads the stored estimate:
nothing is refitted.  Exit status 0, or 2 with a one-line message for a missing, foreign or
invalid file (naming the first offending row), a file-system failure or a bad flag.

``verify`` checks the store whole (:mod:`study.online.audit`; ``--replay``: the history refitted
and compared bit for bit).  Exit status 0 for a valid store, 1 for an invalid one (one line naming
the file and the first offending row), 2 when it cannot be checked (no such file, a file-system
failure).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import commands as admin
from .service import serve

SE_CHOICES = ("cluster", "model", "sandwich")  # report.SE_TEXT's keys, named here so that --help imports no scipy


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m study.online", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="counts, the ranking with CIs, the ranking diagram (PNG)")
    show.add_argument("file", type=Path, help="the ranker's SQLite store")
    show.add_argument("--se", choices=["auto", *SE_CHOICES], default="auto",
                      help="standard errors of the CIs: model (the paper's Phi_11), sandwich (robust to ties), "
                           "cluster (by judge); auto: cluster where two named judges told, else model")
    show.add_argument("--level", type=float, default=0.95, help="CI level (default 0.95)")
    show.add_argument("--anytime", action="store_true",
                      help="show confidence sequences (valid however often one looks) instead of fixed-time CIs")
    show.add_argument("--top", type=int, default=1,
                      help="the stopping rule's k: is the top-k set separated from the rest? (default 1)")
    where = show.add_mutually_exclusive_group()
    where.add_argument("--png", type=Path, help="where to draw the diagram (default: FILE's name + _diagram.png)")
    where.add_argument("--no-png", action="store_true", help="draw no diagram")
    check = commands.add_parser("verify", help="check the store whole (schema, every row, the checkpoint); "
                                               "exit 1 if it is not a valid store")
    check.add_argument("file", type=Path, help="the ranker's SQLite store")
    check.add_argument("--replay", action="store_true",
                       help="also refit the whole history and compare the stored estimate and checkpoint bit for bit")
    admin.add_arguments(commands)
    serve.add_arguments(commands.add_parser(
        "serve", help="serve the store over HTTP: a JSON API for judges anywhere, a live page at /",
        description=serve.__doc__.split("\n\n")[0]))
    return parser


def told_contexts(ranker):
    from . import report

    return report.told_contexts(ranker._read().rows.arrays()[2])


def show(args) -> int:
    from .ranker import Ranker  # each command imports what it needs, when it runs (a CLI's start is its speed)
    from .report import MAX_DIAGRAM_ITEMS, show_text
    from .store import StoreFileError

    if not 0.0 < args.level < 1.0:
        print(f"error: --level must lie in (0, 1), got {args.level}", file=sys.stderr)
        return 2
    try:
        ranker = Ranker(args.file, readonly=True)
    except (ValueError, StoreFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with ranker:
        if not 1 <= args.top < ranker.config.n_items:
            print(f"error: --top must lie in [1, {ranker.config.n_items - 1}], got {args.top}", file=sys.stderr)
            return 2
        print(show_text(ranker, level=args.level, se=args.se, anytime=args.anytime, top=args.top))
        if args.no_png or ranker.n_told == 0:
            return 0
        if ranker.config.n_items > MAX_DIAGRAM_ITEMS:
            print(f"diagram: not drawn ({ranker.config.n_items} items; at most {MAX_DIAGRAM_ITEMS} make a "
                  "readable one)")
            return 0
        png = args.png or args.file.with_name(args.file.name + "_diagram.png")
        contexts = told_contexts(ranker)
        kind = "uncertainty-aware"
        try:
            ranker.diagram(contexts, png, uncertainty=True, level=args.level, se=args.se)
        except ValueError:  # no CIs yet (or a cycle among many items): the point version
            kind = "point (no CIs yet)"
            ranker.diagram(contexts, png, uncertainty=False)
        print(f"diagram: {png} ({kind}, over {len(contexts)} told contexts)")
    return 0


def verify(args) -> int:
    from .audit import summary_text, verify_store
    from .store import StoreError, StoreFileError

    if not args.file.is_file():
        print(f"error: {args.file}: no such ranker store", file=sys.stderr)
        return 2
    try:
        summary = verify_store(args.file, replay=args.replay)
    except StoreError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    except StoreFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary_text(summary))
    print("ok")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve.serve(args)
    if args.command in ("judges", "export", "import", "horizon", "items"):
        return {"judges": admin.judges_command, "export": admin.export_command, "import": admin.import_command,
                "horizon": admin.horizon_command, "items": admin.items_command}[args.command](args)
    return verify(args) if args.command == "verify" else show(args)


if __name__ == "__main__":
    raise SystemExit(main())
