"""How many comparisons a model added to a live store needs before its interval is narrow
(:mod:`study.online.items`): a ranker of n models (a BTL truth, contexts (1, N(0, 0.3^2) ...)) runs
``--warmup`` asks, a newcomer joins, and after every ``--every`` further asks the width of its 95%
interval of x'theta at the mean context is read; reported: the comparisons of the newcomer (its
told rows times M) at which the width first falls below each target, median and quartiles over
the seeds, and how many of its asks the rule forced (10 d).

    python -m benchmarks.newcomer                       # n = 5, d = 2, M = 1, 20 seeds
    python -m benchmarks.newcomer --dim 5 --seeds 10

Not a test: it takes a minute or two (the ranker runs in-process on a temporary store).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from study.online import Ranker
from study.online.items import add, newcomer_asks


def one(seed: int, n: int, d: int, warmup: int, after: int, every: int, folder: Path):
    rng = np.random.default_rng(seed)
    truth = rng.normal(0, 0.7, (n + 1, d))

    def play(ranker, asks):
        tickets = [ranker.ask(np.r_[1.0, rng.normal(0, 0.3, d - 1)]) for _ in range(asks)]
        ranker.tell_many([(k, int(rng.random() < 1 / (1 + np.exp((truth[k.major] - truth[k.other]) @ np.array(k.x)))))
                          for k in tickets])

    widths = []
    with Ranker(folder / f"s{seed}.sqlite", items=[f"m{i}" for i in range(n)], dim=d, T=warmup + after + 1,
                T0=warmup // 2, seed=seed) as ranker:
        for _ in range(warmup // 50):
            play(ranker, 50)
        add(ranker, "new")
        for _ in range(after // every):
            play(ranker, every)
            mine = ranker.ranking().set_index("name").loc["new"]
            widths.append((_newcomer_rows(ranker), float(mine["upper"] - mine["lower"])))
    return widths


def _newcomer_rows(ranker) -> int:
    ledger = ranker._opened.ledger
    item = ranker.config.n_items - 1
    asked = ledger.tell_ask[:ledger.n_tells] - 1
    mine = (ledger.major[asked] == item) | (ledger.other[asked] == item)
    return int(ledger.m[:ledger.n_tells][mine].sum())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--after", type=int, default=400)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--targets", type=float, nargs="+", default=[2.0, 1.5, 1.0, 0.75])
    args = parser.parse_args(argv)
    started = time.time()
    reached = {w: [] for w in args.targets}
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            widths = one(seed, args.n, args.dim, args.warmup, args.after, args.every, Path(folder))
            for w in args.targets:
                hit = [c for c, width in widths if np.isfinite(width) and width < w]
                reached[w].append(hit[0] if hit else np.inf)
    print(f"n = {args.n} models + 1 newcomer, d = {args.dim}, M = 1, {args.warmup} asks before it joins; the rule "
          f"forces it into its first {newcomer_asks(type('c', (), {'dim': args.dim})())} asks; {args.seeds} seeds")
    print(f"{'CI width <':>12}{'median':>10}{'quartiles':>16}{'not reached':>14}   (newcomer comparisons)")
    for w in args.targets:
        values = np.array(reached[w])
        finite = values[np.isfinite(values)]
        q = np.percentile(finite, [25, 50, 75]) if len(finite) else [np.nan] * 3
        print(f"{w:12.2f}{q[1]:10.0f}{f'{q[0]:.0f}-{q[2]:.0f}':>16}{int(np.sum(~np.isfinite(values))):>14}")
    print(f"wall {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
