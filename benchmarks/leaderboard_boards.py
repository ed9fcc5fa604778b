"""The published-board options of ``python -m study.leaderboard`` on a realistic 200,000-vote log,
one command each, timed from outside (wall clock, CPU of the child, its peak resident memory).

    python -m benchmarks.leaderboard_boards [--rows 200000] [--models 32] [--data DIR]

The log (fixed seed): 32 models of spread strengths, both kinds of tie, about 55,000 judges (half
the votes by a thousand power voters, half by many occasional ones), a ``category`` column
(coding, math, writing, other), a newcomer with 44 votes, and dirty names (a case variant and a space variant of two models, mapped
back by ``--normalise-names``, and a misspelt name mapped by ``--aliases``).  Cases: the plain board;
``--anchor``; ``--min-votes 500`` (drops the newcomer); ``--preliminary-below 5000``; ``--category
category --at coding``; ``--by category`` (four boards, the whole log's and an overview);
``--aliases FILE --normalise-names``.  Each writes the Markdown, CSV, JSON, arena board and
catalog, without figures (``--figures`` draws them too).  The issue's target is 10 s wall each on
two cores; numbers depend on the machine and its load (docs/leaderboard.md).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CATEGORIES = ("coding", "math", "writing", "other")


def make_log(rows: int, models: int, seed: int = 42):
    import pandas as pd

    rng = np.random.default_rng(seed)
    names = np.array([f"model-{k:02d}" for k in range(models)], dtype=object)
    strength = np.linspace(1.2, -1.2, models) + rng.normal(0, 0.1, models)
    a = rng.integers(0, models, rows)
    b = (a + 1 + rng.integers(0, models - 1, rows)) % models
    category = rng.choice(np.array(CATEGORIES, dtype=object), rows)
    p = 1 / (1 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(rows)
    winner = np.where(u < 0.12, "tie", np.where(u < 0.18, "tie (bothbad)",
                                                 np.where(rng.random(rows) < p, "model_a", "model_b")))
    # half the votes by a thousand power voters (Zipf), half by many occasional ones
    judges = np.where(rng.random(rows) < 0.5, np.minimum(rng.zipf(1.6, rows) - 1, 999),
                      1000 + rng.integers(0, 80_000, rows))
    frame = pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                          "judge": np.char.add("user-", judges.astype(str)), "category": category})
    newcomer = 44  # the newcomer, judged in every category
    frame.loc[:newcomer - 1, "model_a"] = "newcomer"
    dirty = frame.model_a.to_numpy(copy=True)
    dirty[(dirty == "model-03") & (rng.random(rows) < 0.3)] = "MODEL-03"
    dirty[(dirty == "model-07") & (rng.random(rows) < 0.3)] = "model-07 "
    dirty[(dirty == "model-11") & (rng.random(rows) < 0.05)] = "modle-11"
    return frame, frame.assign(model_a=dirty)


def cases(folder: Path, figures: bool) -> dict:
    log, dirty = str(folder / "votes.parquet"), str(folder / "dirty.parquet")
    common = ["--quiet"] + ([] if figures else ["--no-figures"])
    return {"plain": [log, *common],
            "anchor": [log, "--anchor", "model-05=1250", *common],
            "min-votes": [log, "--min-votes", "500", *common],
            "preliminary": [log, "--preliminary-below", "5000", *common],
            "at-category": [log, "--category", "category", "--at", "coding", *common],
            "by-category": [log, "--by", "category", *common],
            "aliases+normalise": [dirty, "--aliases", str(folder / "aliases.csv"), "--normalise-names", *common]}


def run(argv, out: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "study.leaderboard", *argv, "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "peak_mb": round(after.ru_maxrss / 1024.0)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.leaderboard_boards", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--models", type=int, default=32)
    p.add_argument("--data", default=None, help="a directory for the generated files (default: a temporary one)")
    p.add_argument("--figures", action="store_true", help="draw the figures too")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.data or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        clean, dirty = make_log(args.rows, args.models)
        clean.to_parquet(folder / "votes.parquet", index=False)
        dirty.to_parquet(folder / "dirty.parquet", index=False)
        (folder / "aliases.csv").write_text("alias,name\nmodle-11,model-11\n")
        judges = clean.judge.nunique()
        print(f"{args.rows:,} votes, {args.models + 1} models, {judges:,} judges; load average "
              f"{os.getloadavg()[0]:.1f}")
        results = {}
        for name, argv_case in cases(folder, args.figures).items():
            results[name] = run(argv_case, Path(scratch) / f"out-{name}")
            print(f"{name:>18}: {results[name]['wall_s']:6.2f} s wall, {results[name]['cpu_s']:6.2f} s CPU, "
                  f"peak {results[name]['peak_mb']:,} MB (the largest child so far)", flush=True)
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
