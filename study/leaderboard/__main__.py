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

from .battles import TIE_RULES
from .board import SCALES, SE_CHOICES
from .files import LeaderboardInputError
from .output import FORMATS, render

STAGES = ("read", "aggregate", "check", "fit", "covariance", "table", "figures")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m study.leaderboard",
                                description="A leaderboard with intervals and simultaneous rank intervals from files "
                                            "of pairwise judgments (LMArena battles, study judgments, counts).")
    p.add_argument("files", nargs="+", metavar="FILE", help="CSV, Parquet, JSON or JSON Lines; several are merged")
    p.add_argument("--out", default="leaderboard", help="directory to write leaderboard.{md,csv,json} and the "
                                                        "figures to (default: ./leaderboard)")
    p.add_argument("--formats", default=",".join(FORMATS), help="which of md,csv,json to write")
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
    p.add_argument("--scale", choices=SCALES, default="logit",
                   help="logit (x'theta) or elo (1000 + 400/ln 10 x the logit score, LMArena's scale)")
    p.add_argument("--anchor", default=None, metavar="MODEL=RATING", help="with --scale elo: shift so that MODEL has RATING")
    p.add_argument("--category", default=None, help="a category column: one ranking per category (one-hot contexts)")
    p.add_argument("--features", default=None, help="numeric context columns, comma-separated: x = (1, features)")
    p.add_argument("--no-intercept", action="store_true", help="with --features: no constant 1 in x")
    p.add_argument("--context", default=None, help="a column of context vectors (default: 'context' if present)")
    p.add_argument("--embed", default=None, help="a column of prompt texts to embed (extra 'llm-prepare')")
    p.add_argument("--dim", type=int, default=10, help="with --embed: the context dimension")
    p.add_argument("--at", default=None, help="rank at this context: a JSON list of d numbers, or a category's name")
    p.add_argument("--ridge", type=float, default=0.0, help="a ridge penalty for separable data (paper eq. opt)")
    p.add_argument("--min-judgments", type=int, default=10, help="models with fewer comparisons are refused")
    p.add_argument("--draws", type=int, default=10_000, help="Gaussian draws of the rank intervals' critical value")
    p.add_argument("--seed", type=int, default=0, help="seed of those draws")
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


def build(args, progress):
    """(the text to print, {file name: bytes}) of the leaderboard the arguments ask for."""
    from . import leaderboard
    from .figures import draw

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"--formats: unknown {unknown}; choose from {list(FORMATS)}")
    anchor = _anchor(args.anchor)
    features = [c.strip() for c in args.features.split(",")] if args.features else None
    board = leaderboard(args.files, tie_rule=args.tie_rule, se=args.se, level=args.level, ridge=args.ridge,
                        anytime=args.anytime, tightest_at=args.tightest_at, judge=None if args.judge == "none"
                        else args.judge, category=args.category, features=features, context=args.context,
                        embed=args.embed, intercept=not args.no_intercept, dim=args.dim,
                        min_judgments=args.min_judgments, draws=args.draws, seed=args.seed, progress=progress)
    progress("table")
    table = board.table(_at(args.at), scale=args.scale, anchor=anchor)
    files = {name: text.encode("utf-8") for name, text in render(table, formats).items()}
    if not args.no_figures:
        progress("figures")
        files.update(draw(board, table))
    return render(table, ("md",))["leaderboard.md"], files


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
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (out / name).write_bytes(data)
    except OSError as exc:
        print(f"study.leaderboard: error: cannot write to {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(text)
        print(f"written to {out}/: {', '.join(sorted(files))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
