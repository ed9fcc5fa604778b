"""Stage 1's exact estimate, refit by refit: the current tree against a commit's, paired on the same
refits in one process.

    python -m benchmarks.exact_replay --ref ca59dcc                   # Setting B, RB and ETA, seeds 1-2
    python -m benchmarks.exact_replay --ref ca59dcc --setting A --seeds 4

The replications run once under the current tree (``tie_break="exact"``) and every call of
:func:`study.core.mle.exact_nearest` is kept (the data as they were, the start, the arguments).
Each kept refit is then solved again by both trees' ``exact_nearest``, alternating which goes first,
each from the same state (the data's kept row space rebuilt up to the refit's previous row, outside
the timing), ``--reps`` times; a refit's time is the least of its repetitions. So the load of the
machine falls on both alike and within a refit, which is what the per-path ratios need: the
benchmark of whole replications (``python -m benchmarks.bench --regimes``) moves by +-10% between
rounds.  Printed: per path of the current tree (the shortcut, where a ball binds, where the data
identify theta, the general solver) the refits, each tree's mean CPU, the ratio of the means and
the median of the refits' ratios; and how far apart the two trees' answers are.

The reference is the package ``study`` of commit ``--ref`` exported with ``git archive`` and
imported under another name (its absolute imports renamed), beside the current one.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .paper_study import ROOT, export_reference, load_average

PATHS = ("shortcut", "balls", "identified", "general")


def import_reference(ref: str, into: Path, name: str = "study_reference"):
    """The package ``study`` of commit ``ref`` (or the tree of a directory ``ref``), importable as
    ``name``; returns its modules ``(mle, rowspace, nearest)``."""
    source = Path(ref)
    target = into / name
    if source.is_dir():
        shutil.copytree(source / "study", target)
    else:
        (export_reference(ref, into) / "study").rename(target)
    pattern = re.compile(r"\b(from|import) study\b")
    for path in target.rglob("*.py"):
        text = path.read_text()
        renamed = pattern.sub(lambda m: f"{m.group(1)} {name}", text)
        if renamed != text:
            path.write_text(renamed)
    sys.path.insert(0, str(into))
    return tuple(importlib.import_module(f"{name}.core.{module}") for module in ("mle", "rowspace", "nearest"))


def capture(setting: str, methods, seeds, **overrides) -> list:
    """Every exact_nearest call of the replications: (data without its kept row space, start, kwargs)."""
    from dataclasses import replace

    import study
    from study.core import mle
    from study.simulation.settings import SETTINGS
    calls, solve = [], mle.exact_nearest

    def kept(data, theta_start, **kwargs):
        state = copy.deepcopy(data)
        state.__dict__.pop("_row_space", None)
        calls.append((state, theta_start.copy(), copy.deepcopy(kwargs)))
        return solve(data, theta_start, **kwargs)

    mle.exact_nearest = kept
    try:
        for method in methods:
            for seed in seeds:
                study.run_replication(replace(SETTINGS[setting], tie_break="exact"), method, seed=seed, **overrides)
    finally:
        mle.exact_nearest = solve
    return calls


def timed(modules, call):
    """(CPU seconds, result) of one tree's exact_nearest on a fresh copy of ``call``."""
    mle, rowspace, nearest = modules
    data, start, kwargs = call
    data, kwargs = copy.deepcopy(data), copy.deepcopy(kwargs)
    if kwargs.get("prox") is None and data.t > 1:  # the kept row space as the previous refit left it
        design = nearest.design(data)
        data._row_space = rowspace.RowSpace(design.shape[1]).extend(design[: data.t - 1])
    began = time.process_time()
    out = mle.exact_nearest(data, start, **kwargs)
    return time.process_time() - began, out


def replay(calls, reference, reps: int) -> dict:
    """Per refit: (path, reference CPU, current CPU, max |theta difference|)."""
    from study.core import mle, nearest, rangekkt, rowspace
    current = (mle, rowspace, nearest)
    flags, solve_separated = {}, rangekkt.solve_separated

    def marked(*args, **kwargs):
        got = solve_separated(*args, **kwargs)
        flags["balls"] = got is not None
        return got

    rows = []
    rangekkt.solve_separated = marked
    try:
        for call in calls:
            best, theta = {}, {}
            for rep in range(reps):
                for name in (("reference", "current") if rep % 2 == 0 else ("current", "reference")):
                    flags.clear()
                    seconds, out = timed(reference if name == "reference" else current, call)
                    best[name] = min(best.get(name, np.inf), seconds)
                    theta[name] = out.theta
                    if name == "current":
                        path = ("identified" if call[2].get("prox") == 0.0 else "balls" if flags.get("balls")
                                else "shortcut" if out.newton_steps == 0 else "general")
            rows.append((path, best["reference"], best["current"],
                         float(np.abs(theta["reference"] - theta["current"]).max())))
    finally:
        rangekkt.solve_separated = solve_separated
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="a commit (or a directory holding a tree's study package)")
    parser.add_argument("--setting", default="B", choices=("A", "B"))
    parser.add_argument("--methods", nargs="+", default=["RB", "ETA"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=2, help="solves of each refit by each tree (the least is kept)")
    args = parser.parse_args(argv)
    if not Path(args.ref).is_dir() and subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                                                       f"{args.ref}^{{commit}}"], capture_output=True).returncode:
        parser.error(f"--ref: {args.ref!r} is neither a commit of {ROOT} nor a directory")
    from threadpoolctl import threadpool_limits
    with tempfile.TemporaryDirectory(prefix="bench-exact-replay-") as tmp, threadpool_limits(limits=1, user_api="blas"):
        reference = import_reference(args.ref, Path(tmp))
        calls = capture(args.setting, args.methods, range(1, args.seeds + 1))
        rows = replay(calls, reference, args.reps)
    print(f"Setting {args.setting}, {' and '.join(args.methods)}, seeds 1-{args.seeds}: {len(rows)} stage-1 refits "
          f"with tie_break='exact', each solved by the current tree and by {args.ref}, alternating, the least of "
          f"{args.reps}; one BLAS thread; load {load_average()}")
    print(f"{'path (current)':16}{'refits':>8}{'reference us':>14}{'current us':>12}{'ratio':>8}{'median ratio':>14}")
    for path in PATHS:
        chosen = np.array([(r, c) for p, r, c, _ in rows if p == path]).reshape(-1, 2)
        if len(chosen):
            print(f"{path:16}{len(chosen):8d}{1e6 * chosen[:, 0].mean():14.0f}{1e6 * chosen[:, 1].mean():12.0f}"
                  f"{chosen[:, 1].sum() / chosen[:, 0].sum():8.3f}{np.median(chosen[:, 1] / chosen[:, 0]):14.3f}")
    total = np.array([(r, c) for _, r, c, _ in rows])
    print(f"{'all':16}{len(rows):8d}{1e6 * total[:, 0].mean():14.0f}{1e6 * total[:, 1].mean():12.0f}"
          f"{total[:, 1].sum() / total[:, 0].sum():8.3f}")
    apart = np.array([d for *_, d in rows])
    print(f"answers: max |theta_current - theta_reference| {apart.max():.1e}; refits apart by more than 1e-8: "
          f"{int((apart > 1e-8).sum())} of {len(rows)}")


if __name__ == "__main__":
    main()
