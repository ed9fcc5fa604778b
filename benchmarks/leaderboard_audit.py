"""The board audit's false-alarm rates and power, and the time of ``--style`` and ``--audit`` on a
200k-vote log.

    python -m benchmarks.leaderboard_audit rates [--seeds 200] [--planted-seeds 50] [--strength 1]
    python -m benchmarks.leaderboard_audit timing [--rows 200000] [--models 32] [--judges 54000]

``rates``: for each of ``--seeds`` clean simulated boards (``simulate("clean", seed)``: 8 models,
4,000 votes, BTL outcomes with 10% ties at random, model_a's side at random, judges drawn with a
Zipf law -- power voters -- but no taste), how often each probe fires (its false-alarm rate), and
for each probe's planted board (``PLANTED``) how often that probe fires (its power), with the
binomial standard errors.  ``timing``: a 200k-vote LMArena log with ``conv_metadata`` written to a
temporary Parquet file, and ``python -m study.leaderboard FILE --no-figures --quiet`` timed from
outside, plain, with ``--style --position`` and with ``--audit`` (wall and CPU seconds).
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

PLANTED = {
    "position": "model_a's side wins with +0.3 log-odds",
    "ties": "one model ties in 35% of its battles (the others 10%), whoever the opponent",
    "intransitivity": "three equal models in a cycle, each beating the next 75% of the time",
    "connectivity": "two halves of the models met in 6 battles only",
    "coverage": "one model drawn a tenth as often as the others",
    "clustering": "60 judges each with a taste (a per-model offset, SD 0.8) over all votes",
    "influence": "one judge casts 8% of the votes, always for the weakest model",
}
PROBES = ("position", "ties", "intransitivity", "connectivity", "coverage", "clustering", "influence")


def simulate(kind: str = "clean", seed: int = 0, *, models: int = 8, votes: int = 4000, judges: int = 300,
             strength: float = 1.0):
    """A battle log (model_a, model_b, winner, judge): the clean board or one with ``kind`` planted
    (``strength`` scales the defect: 1 is ``PLANTED``'s; connectivity's has one strength)."""
    s = float(strength)
    rng = np.random.default_rng(np.random.SeedSequence([seed, PROBES.index(kind) + 1 if kind in PROBES else 0]))
    n = models
    skill = np.linspace(1.0, -1.0, n)
    weight = np.ones(n)
    if kind == "coverage":
        weight[n // 2] = 1.0 - 0.9 * s
    a = rng.choice(n, votes, p=weight / weight.sum())
    b = rng.choice(n, votes, p=weight / weight.sum())
    while (same := a == b).any():
        b[same] = rng.choice(n, int(same.sum()), p=weight / weight.sum())
    if kind == "connectivity":  # the halves meet in six battles only
        half = n // 2
        cross = (a < half) != (b < half)
        b[cross] = np.where(a[cross] < half, rng.integers(0, half, int(cross.sum())),
                            rng.integers(half, n, int(cross.sum())))
        b = np.where(a == b, (b + 1) % half + (a >= half) * half, b)
        a[:6], b[:6] = np.arange(6) % half, half + np.arange(6) % half
    if kind == "clustering":
        judge = rng.integers(0, 60, votes)
        taste = rng.normal(0.0, 0.8 * s, (60, n))
        u = skill[a] - skill[b] + taste[judge, a] - taste[judge, b]
    else:
        judge = np.minimum(rng.zipf(1.6, votes), judges) - 1
        u = skill[a] - skill[b]
    if kind == "position":
        u = u + 0.3 * s
    if kind == "intransitivity":  # 0 beats 1, 1 beats 2, 2 beats 0, each 3 to 1
        for x, y in [(0, 1), (1, 2), (2, 0)]:
            u[(a == x) & (b == y)] = s * np.log(3.0)
            u[(a == y) & (b == x)] = -s * np.log(3.0)
    p_a = 1.0 / (1.0 + np.exp(-u))
    tie_p = np.full(votes, 0.1)
    if kind == "ties":
        tie_p = np.where((a == n // 2) | (b == n // 2), 0.1 + 0.25 * s, 0.1)
    tie = rng.random(votes) < tie_p
    won_a = rng.random(votes) < p_a
    if kind == "connectivity":
        tie[:6], won_a[:6] = False, np.arange(6) % 2 == 0
    if kind == "influence":
        shill = rng.random(votes) < 0.08 * s
        weakest = n - 1
        a[shill] = weakest
        b[shill] = rng.integers(0, n - 1, int(shill.sum()))
        tie[shill], won_a[shill] = False, True
        judge = np.where(shill, judges + 1, judge)
    winner = np.where(tie, "tie", np.where(won_a, "model_a", "model_b"))
    names = np.array([f"model-{k:02d}" for k in range(n)])
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                         "judge": [f"u{j}" for j in judge]})


def fires(frame) -> dict:
    """{probe: fired} of the audit of the board of ``frame``."""
    from study.leaderboard import leaderboard
    from study.leaderboard.audit import audit_board

    board = leaderboard(frame, draws=200)
    return {p.name: p.fired for p in audit_board(board).probes}


def rates(seeds: int, planted_seeds: int, strength: float = 1.0) -> None:
    counts = {name: 0 for name in PROBES}
    start = time.perf_counter()
    for seed in range(seeds):
        for name, fired in fires(simulate("clean", seed)).items():
            counts[name] += bool(fired)
    print(f"clean boards: {seeds} seeds ({time.perf_counter() - start:.0f} s)")
    for name in PROBES if seeds else ():
        rate = counts[name] / seeds
        print(f"  {name:15s} false-alarm rate {rate:.3f} (SE {np.sqrt(max(rate * (1 - rate), 1e-12) / seeds):.3f})")
    print(f"planted boards: {planted_seeds} seeds each, strength {strength:g}")
    for name in PROBES:
        hit = sum(bool(fires(simulate(name, seed, strength=strength))[name]) for seed in range(planted_seeds))
        print(f"  {name:15s} power {hit / planted_seeds:.3f} ({hit}/{planted_seeds}): {PLANTED[name]}")


def lmarena_log(rows: int, models: int, judges: int, seed: int = 0):
    """An LMArena log with conv_metadata (the four style counts per side), power voters and many judges."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(1.5, -1.5, models)
    verbose = rng.normal(size=models)
    a = rng.integers(0, models, rows)
    b = (a + rng.integers(1, models, rows)) % models
    la, lb = rng.poisson(300 * np.exp(0.3 * verbose[a])), rng.poisson(300 * np.exp(0.3 * verbose[b]))
    counts = [rng.poisson(lam, rows) for lam in (2, 2, 3, 3, 1, 1)]
    d = (la - lb) / (la + lb + 1.0)
    u = skill[a] - skill[b] + 0.5 * (d - d.mean()) / d.std()
    r = rng.random(rows)
    winner = np.where(r < 0.1, "tie", np.where(r < 0.15, "tie (bothbad)",
                                               np.where(rng.random(rows) < 1 / (1 + np.exp(-u)), "model_a", "model_b")))
    meta = [{"sum_assistant_a_tokens": int(la[k]), "sum_assistant_b_tokens": int(lb[k]),
             "header_count_a": {"h1": int(counts[0][k]), "h2": 0}, "header_count_b": {"h1": int(counts[1][k]), "h2": 0},
             "list_count_a": {"ordered": int(counts[2][k]), "unordered": 0},
             "list_count_b": {"ordered": int(counts[3][k]), "unordered": 0},
             "bold_count_a": {"**": int(counts[4][k]), "__": 0}, "bold_count_b": {"**": int(counts[5][k]), "__": 0}}
            for k in range(rows)]
    names = np.array([f"model-{k:02d}" for k in range(models)])
    # a quarter of the votes from 200 power voters (Zipf), the rest spread over the other judges
    power = rng.random(rows) < 0.25
    judge = np.where(power, (rng.zipf(1.5, rows) - 1) % 200, 200 + rng.integers(0, judges - 200, rows))
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                         "judge": [f"u{j}" for j in judge], "conv_metadata": meta})


def timing(rows: int, models: int, judges: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "votes.parquet"
        frame = lmarena_log(rows, models, judges)
        # for the style options combined with the board's row selections: three categories and a
        # model with 200 votes (under --min-votes 1000)
        frame["category"] = np.random.default_rng(1).choice(["coding", "math", "writing"], len(frame))
        frame.loc[:199, "model_b"] = "model-rare"
        frame.to_parquet(path)
        names = len(set(frame.model_a) | set(frame.model_b))
        print(f"{rows:,} votes, {names} models, {frame.judge.nunique():,} judges; load average "
              f"{os.getloadavg()[0]:.1f}")
        for label, extra in (("plain", []), ("--style --position", ["--style", "--position"]),
                             ("--audit", ["--audit"]), ("--style --min-votes 1000", ["--style", "--min-votes", "1000"]),
                             ("--style --at coding", ["--style", "--category", "category", "--at", "coding"]),
                             ("--style --audit --by", ["--style", "--audit", "--by", "category"])):
            command = [sys.executable, "-m", "study.leaderboard", str(path), "--out", str(Path(folder) / "out"),
                       "--no-figures", "--quiet", *extra]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, check=True)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            print(f"  {label:26s} wall {wall:5.2f} s, CPU {cpu:5.2f} s")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.leaderboard_audit")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("rates")
    r.add_argument("--seeds", type=int, default=200)
    r.add_argument("--planted-seeds", type=int, default=50)
    r.add_argument("--strength", type=float, default=1.0, help="scales the planted defects (1: PLANTED's)")
    t = sub.add_parser("timing")
    t.add_argument("--rows", type=int, default=200_000)
    t.add_argument("--models", type=int, default=32)
    t.add_argument("--judges", type=int, default=54_000)
    args = parser.parse_args(argv)
    if args.what == "rates":
        rates(args.seeds, args.planted_seeds, args.strength)
    else:
        timing(args.rows, args.models, args.judges)


if __name__ == "__main__":
    main()
