"""``python -m study.leaderboard FILE [FILE ...]``: the leaderboard of files of pairwise judgments,
printed as Markdown and written (Markdown, CSV, JSON, figures) to ``--out``.

Everything is read, checked and computed before anything is written: bad input exits with status
2 and one line on standard error naming the file, row, column or models, and writes nothing.
A progress bar on standard error (where it is a terminal) follows the stages and the fit's Newton
steps.  docs/leaderboard.md is the guide.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from .battles import TIE_RULES
from .board import SCALES, SE_CHOICES
from .files import LeaderboardInputError
from .output import FORMATS, render, write_all
from .published import PRELIMINARY_BELOW, arena_markdown, catalog_text

ARENA_FORMATS = ("arena", "catalog")  # arena.md (LMArena's columns) and arena.json (arena-catalog's shape)

STAGES = ("read", "aggregate", "check", "fit", "covariance", "table", "figures")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m study.leaderboard",
                                description="A leaderboard with intervals and simultaneous rank intervals from files "
                                            "of pairwise judgments (LMArena battles, study judgments, counts).")
    p.add_argument("files", nargs="+", metavar="FILE", help="CSV, Parquet, JSON or JSON Lines; several are merged")
    p.add_argument("--out", default="leaderboard", help="directory to write leaderboard.{md,csv,json} and the "
                                                        "figures to (default: ./leaderboard)")
    p.add_argument("--formats", default=",".join(FORMATS + ARENA_FORMATS),
                   help="which of md,csv,json (the project's table), arena (arena.md: LMArena's Rank (UB), Arena "
                        "Score, CI as +x/-y, votes) and catalog (arena.json: arena-catalog's shape) to write")
    p.add_argument("--no-figures", action="store_true", help="write no figures")
    p.add_argument("--tie-rule", choices=TIE_RULES, default="half",
                   help="half: both kinds of tie are half a win each (LMArena's count, the default); drop-bothbad: "
                        "'tie (bothbad)' rows left out; drop: every tie left out")
    p.add_argument("--se", choices=SE_CHOICES, default="auto",
                   help="the covariance: model (the paper's Phi_11), sandwich (each comparison a unit), cluster (each "
                        "judge a unit); auto: cluster where there is a judge column, else sandwich")
    p.add_argument("--judge", default="auto", help="the judge column for --se cluster (default: 'judge' if present; "
                                                   "none: no judges)")
    p.add_argument("--level", type=float, default=0.95, help="coverage of the intervals and rank intervals")
    p.add_argument("--anytime", action="store_true", help="anytime-valid confidence sequences instead of CIs")
    p.add_argument("--tightest-at", type=float, default=None,
                   help="with --anytime: the number of comparisons at which the sequences are tightest, fixed "
                        "before looking (default: the file's)")
    p.add_argument("--scale", choices=SCALES, default=None,
                   help="logit (x'theta; the default) or elo (1000 + 400/ln 10 x the logit score, LMArena's scale; "
                        "the default with --anchor)")
    p.add_argument("--anchor", default=None, metavar="MODEL=RATING",
                   help="elo scale with MODEL at RATING; each interval is then that of the difference from MODEL")
    p.add_argument("--category", default=None, help="a category column: one ranking per category (one-hot contexts)")
    p.add_argument("--features", default=None, help="numeric context columns, comma-separated: x = (1, features)")
    p.add_argument("--no-intercept", action="store_true", help="with --features: no constant 1 in x")
    p.add_argument("--context", default=None, help="a column of context vectors (default: 'context' if present)")
    p.add_argument("--embed", default=None, help="a column of prompt texts to embed (extra 'llm-prepare')")
    p.add_argument("--dim", type=int, default=10, help="with --embed: the context dimension")
    p.add_argument("--by", default=None, metavar="COLUMN",
                   help="a board per category of COLUMN (each on its own rows) and the whole log's, with an overview")
    p.add_argument("--at", default=None, help="rank at this context: a JSON list of d numbers, or a category's name")
    p.add_argument("--ridge", type=float, default=0.0, help="a ridge penalty for separable data (paper eq. opt)")
    p.add_argument("--min-judgments", type=int, default=10, help="models with fewer comparisons are refused")
    p.add_argument("--aliases", default=None, metavar="FILE",
                   help="map model names: a CSV of alias,name rows or a JSON object {alias: name}")
    p.add_argument("--normalise-names", action="store_true",
                   help="merge model names equal up to case and spaces (shown as most judgments spell them)")
    p.add_argument("--min-votes", type=int, default=None, metavar="N",
                   help="drop (instead of refusing) models with fewer than N votes, with a note; 0 keeps every model")
    p.add_argument("--preliminary-below", type=int, default=PRELIMINARY_BELOW, metavar="N",
                   help=f"mark models with fewer than N votes as preliminary (default {PRELIMINARY_BELOW})")
    p.add_argument("--draws", type=int, default=10_000, help="Gaussian draws of the rank intervals' critical value")
    p.add_argument("--seed", type=int, default=0, help="seed of those draws")
    p.add_argument("--style", action="store_true",
                   help="style control: shared coefficients on the responses' length and markdown counts (LMArena's "
                        "conv_metadata) in the same fit; Rank (StyleCtrl) beside the raw rank (style.{md,csv,json})")
    p.add_argument("--style-columns", default=None, metavar="A:B,C",
                   help="with --style: other features, A:B per-response counts of model_a and model_b (normalised "
                        "as LMArena's) or C a numeric per-battle feature (standardised)")
    p.add_argument("--position", nargs="?", const="model_a", default=None, metavar="COLUMN",
                   help="a position term (the advantage of the model shown first) in the style fit; COLUMN names "
                        "per row which of model_a/model_b was shown first (default: model_a, LMArena's left side)")
    p.add_argument("--audit", action="store_true",
                   help="audit the board: position bias, ties, intransitivity, connectivity, coverage, vote "
                        "clustering, annotator influence (a section of leaderboard.md, audit.json)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


class Progress:
    """A tqdm bar over the stages (disabled where standard error is not a terminal)."""

    def __init__(self, quiet: bool):
        from tqdm import tqdm
        self.bar = tqdm(total=len(STAGES), desc="leaderboard", unit="stage", leave=False, file=sys.stderr,
                        disable=True if quiet else None)
        self.done = set()

    def __call__(self, stage, residual=None, target=None):
        if stage not in self.done:
            self.done.add(stage)
            self.bar.update(1)
            self.bar.set_description(f"leaderboard: {stage}")
        if residual is not None:
            self.bar.set_postfix_str(f"KKT residual {residual:.2e} (target {target:.1e})")

    def close(self):
        self.bar.close()


def _at(text):
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text  # a category's name
    return value if isinstance(value, list) else text


def _anchor(text):
    if text is None:
        return None
    model, sep, rating = text.rpartition("=")
    try:
        value = float(rating)
    except ValueError:
        value = math.nan
    if not (sep and model and math.isfinite(value)):
        raise ValueError(f"--anchor must be MODEL=RATING, got {text!r}")
    return model, value


def _options(args):
    """(formats, scale, anchor) after checking the options that need no data."""
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS + ARENA_FORMATS))
    if unknown:
        raise ValueError(f"--formats: unknown {unknown}; choose from {list(FORMATS + ARENA_FORMATS)}")
    if args.min_votes is not None and args.min_votes < 0:
        raise ValueError(f"--min-votes must be 0 or more, got {args.min_votes}")
    if args.preliminary_below < 0:
        raise ValueError(f"--preliminary-below must be 0 or more, got {args.preliminary_below}")
    anchor = _anchor(args.anchor)
    scale = args.scale or ("elo" if anchor else "logit")
    if anchor and scale != "elo":
        raise ValueError("--anchor is a rating on the elo scale; it cannot be used with --scale logit")
    if args.by and (args.category or args.features or args.context or args.embed or args.at):
        raise ValueError("--by fits each category on its own rows, without contexts: give no --category, --features, "
                         "--context, --embed or --at with it")
    return formats, scale, anchor


def board_files(board, at, args, formats, scale, anchor, progress, folder="", style=None, figures=None):
    """(the project's Markdown with the --style/--audit sections, the arena Markdown, the elo table,
    {file name: bytes}) of one board; its figures drawn, or with a list ``figures`` (board, table,
    folder) appended to it, to be drawn with the other boards' (:func:`.figures.draw_many`)."""
    from .figures import draw

    table = board.table(at, scale=scale, anchor=anchor)
    table["preliminary"] = table["judgments"] < args.preliminary_below
    table.attrs["preliminary_below"] = args.preliminary_below
    files = {folder + name: text.encode("utf-8")
             for name, text in render(table, [f for f in formats if f in FORMATS]).items()}
    text = render(table, ("md",))["leaderboard.md"]
    sections = _sections(args, board, table, scale, anchor, formats, files, folder, style)
    if sections:
        text = "\n".join([text] + sections)
        if folder + "leaderboard.md" in files:
            files[folder + "leaderboard.md"] = text.encode("utf-8")
    arena = table if scale == "elo" else board.table(at, scale="elo", anchor=anchor)
    arena_text = arena_markdown(arena, args.preliminary_below)
    if "arena" in formats:
        files[folder + "arena.md"] = arena_text.encode("utf-8")
    if args.no_figures:
        pass
    elif figures is not None:
        figures.append((board, table, folder))
    else:
        progress("figures")
        files.update({folder + name: data for name, data in draw(board, table).items()})
    return text, arena_text, arena, files


def build(args, progress):
    """(the text to print, {file name: bytes}) of the leaderboard the arguments ask for."""
    from . import leaderboard
    from .categories import boards, category_names, folder_names, one_category, overview
    from .checks import check_names
    from .read import read_battles

    formats, scale, anchor = _options(args)
    features = [c.strip() for c in args.features.split(",")] if args.features else None
    progress("read")
    battles = read_battles(args.files, tie_rule=args.tie_rule, judge=None if args.judge == "none" else args.judge,
                           category=args.by or args.category, features=features, context=args.context,
                           embed=args.embed, intercept=not args.no_intercept, dim=args.dim, aliases=args.aliases,
                           normalise_names=args.normalise_names)
    style = None
    if args.style or args.style_columns or args.position:  # every row read; each board takes its own rows
        from .style import read_style
        style = read_style(args.files, columns=args.style_columns, position=args.position,
                           style=bool(args.style or args.style_columns))

    def fit(part):
        return leaderboard(part, tie_rule=args.tie_rule, se=args.se, level=args.level, ridge=args.ridge,
                           anytime=args.anytime, tightest_at=args.tightest_at, min_judgments=args.min_judgments,
                           min_votes=args.min_votes, draws=args.draws, seed=args.seed, progress=progress)

    at = _at(args.at)
    if args.by:  # the names are the file's: checked once, before the categories
        n = battles.n_models
        votes = np.bincount(battles.i, battles.m, n) + np.bincount(battles.j, battles.m, n)
        check_names(battles.source, battles.models, votes, 1 if args.min_votes is not None else args.min_judgments,
                    battles.problems)
        full, per = boards(battles, fit)
        if isinstance(full, str) and all(isinstance(b, str) for b in per.values()):
            raise LeaderboardInputError(f"no category could be ranked; the whole log: {full}")
        progress("table")
        folders = folder_names(per)
        files, tables, elo, figures = {}, {}, {}, []
        for label, board in [(None, full), *per.items()]:  # None: the whole log
            if isinstance(board, str):
                continue
            try:
                _, _, elo[label], written = board_files(board, None, args, formats, scale, anchor, progress,
                                                        "" if label is None else folders[label] + "/", style,
                                                        figures)
            except ValueError as exc:  # an anchor model absent from this category (or the whole log), or
                # its --style fit impossible there: that board refused, the others still written
                if label is None:
                    full = " ".join(str(exc).split())
                else:
                    per[label] = " ".join(str(exc).split())
                continue
            tables[label] = elo[label]
            files.update(written)
        if figures:
            from .figures import draw_many
            progress("figures")
            files.update(draw_many(figures))
        text = overview(battles.source, args.by, full, per, tables, folders)
        files["overview.md"] = text.encode("utf-8")
        if "catalog" in formats:
            catalog = {"full": elo[None]} if None in elo else {}
            catalog.update({k: v for k, v in elo.items() if k is not None})
            files["arena.json"] = catalog_text(catalog).encode("utf-8")
        return text, files
    if isinstance(at, str) and category_names(battles) is not None:
        battles, at = one_category(battles, at), None  # that category's rows on their own (.categories)
    board = fit(battles)
    progress("table")
    text, arena_text, arena, files = board_files(board, at, args, formats, scale, anchor, progress, style=style)
    if "catalog" in formats:
        label = args.at if isinstance(_at(args.at), str) else "full"
        files["arena.json"] = catalog_text({label: arena}).encode("utf-8")
    return text + "\n" + arena_text, files


def _sections(args, board, table, scale, anchor, formats, files, folder, style) -> list:
    """The Markdown sections of --style/--position and --audit of one board; their files added to
    ``files`` (under ``folder``).  ``style``: the style features of every row read (:func:`.style.
    read_style`), taken for this board's rows by their row ids."""
    sections = []
    if style is not None:
        from .style import fit_style
        from .style_report import as_json, coefficient_table, csv_text, markdown, style_table
        fit = fit_style(board.battles, style, se=board.se_method)
        styled = style_table(board, fit, table, scale=scale, anchor=anchor)
        coefficients = coefficient_table(fit, board.level)
        sections.append(markdown(styled, coefficients))
        writers = {"md": lambda: sections[-1], "csv": lambda: csv_text(styled),
                   "json": lambda: as_json(styled, coefficients)}
        files.update({f"{folder}style.{kind}": writers[kind]().encode("utf-8") for kind in formats if kind in FORMATS})
    if args.audit:
        from .audit import audit_board
        from .audit_report import as_json as audit_json, markdown as audit_markdown
        report = audit_board(board)
        sections.append(audit_markdown(report))
        files[f"{folder}audit.json"] = audit_json(report).encode("utf-8")
    if f"{folder}leaderboard.json" in files and sections:  # the sections' data in the board's JSON too
        board_json = json.loads(files[f"{folder}leaderboard.json"])
        if isinstance(board_json, dict):
            for name in ("style.json", "audit.json"):
                if folder + name in files:
                    board_json.update(json.loads(files[folder + name]))
            files[f"{folder}leaderboard.json"] = (json.dumps(board_json, indent=1) + "\n").encode("utf-8")
    return sections


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["judges"]:  # python -m study.leaderboard judges FILE: the judge report
        from .judges import main as judges
        return judges(argv[1:])
    args = parser().parse_args(argv)
    progress = Progress(args.quiet)
    try:
        text, files = build(args, progress)
    except (LeaderboardInputError, ValueError) as exc:
        progress.close()
        print(f"study.leaderboard: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    progress.close()
    out = Path(args.out)
    try:
        write_all(out, files)  # whole or not at all (output.write_all)
    except OSError as exc:
        print(f"study.leaderboard: error: cannot write to {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(text)
        print(f"written to {out}/: {', '.join(sorted(files))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
