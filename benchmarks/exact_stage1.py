"""What stage 1's exact nearest argmin costs, by the path that computes it: CPU of the solver per
stage-1 refit where the shortcut of :mod:`study.core.rowspace` answers (no ball binds), where
:mod:`study.core.rangekkt` does (a ball binds: a separated row), where the general solver does (both
declined), and where the data identify theta; against the same replications' stage-2 steps and the
tie-break's stage 1 (``tie_break="nearest"``, the default), in the same run.

    python -m benchmarks.exact_stage1                       # Setting B, RB and ETA, seeds 1-10
    python -m benchmarks.exact_stage1 --setting A --seeds 4

One BLAS thread; the exact and the tie-break replications of a seed alternate (which goes first
alternates too), so that a change in the machine's load falls on both alike.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", default="B")
    parser.add_argument("--methods", nargs="+", default=["RB", "ETA"])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits

    import study
    from study.core import mle, rangekkt, rowspace
    from study.simulation.settings import SETTINGS

    paths = {"shortcut": [0, 0.0], "balls": [0, 0.0], "general": [0, 0.0], "identified": [0, 0.0]}
    answered = {}
    shortcut, exact_nearest, with_balls = rowspace.nearest_without_balls, mle.exact_nearest, rangekkt.solve_separated

    def timed_shortcut(*a, **k):
        got = shortcut(*a, **k)
        answered["yes"] = got is not None
        return got

    def marked_balls(*a, **k):
        got = with_balls(*a, **k)
        answered["balls"] = got is not None
        return got

    def timed_exact(data, theta_start, **kwargs):
        answered["yes"] = answered["balls"] = False
        started = time.process_time()
        out = exact_nearest(data, theta_start, **kwargs)
        path = "identified" if kwargs.get("prox") == 0.0 else (
            ("balls" if answered["balls"] else "shortcut") if answered["yes"] else "general")
        paths[path][0] += 1
        paths[path][1] += time.process_time() - started
        return out

    rowspace.nearest_without_balls, mle.exact_nearest = timed_shortcut, timed_exact
    rangekkt.solve_separated = marked_balls
    totals = {tb: dict(stage1=0.0, steps1=0, stage2=0.0, steps2=0) for tb in ("exact", "nearest")}
    setting = SETTINGS[args.setting]
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            study.run_replication(setting, args.methods[0], seed=10**6, T=60, T0=24)  # warm-up
            for method in args.methods:
                for seed in range(1, args.seeds + 1):
                    for tb in ("exact", "nearest") if seed % 2 else ("nearest", "exact"):
                        cost = study.run_replication(replace(setting, tie_break=tb), method, seed=seed).cost
                        total = totals[tb]
                        for regime in ("tie_break", "exact_balls", "identified"):
                            total["stage1"] += cost[f"cpu_{regime}"]
                            total["steps1"] += cost[f"steps_{regime}"]
                        total["stage2"] += cost["cpu_stage2"]
                        total["steps2"] += cost["steps_stage2"]
    finally:
        rowspace.nearest_without_balls, mle.exact_nearest = shortcut, exact_nearest
        rangekkt.solve_separated = with_balls
    stage2 = sum(t["stage2"] for t in totals.values()) / sum(t["steps2"] for t in totals.values())
    refits = sum(n for n, _ in paths.values())
    print(f"Setting {args.setting}, {' and '.join(args.methods)}, seeds 1-{args.seeds}, one BLAS thread; "
          f"stage 2: {1e6 * stage2:.0f} us a step")
    for path, (n, seconds) in paths.items():
        each = seconds / n if n else 0.0
        print(f"  exact, {path:10s} {n:5d} refits ({100 * n / max(refits, 1):4.1f}%) {1e6 * each:9.0f} us each "
              f"(x{each / stage2:.1f} stage 2; the solver only)")
    for tb, total in totals.items():
        per = total["stage1"] / max(total["steps1"], 1)
        print(f"  stage 1 with tie_break={tb!r}: {1e6 * per:8.0f} us a step (x{per / stage2:.2f} stage 2; the whole "
              "refit step)")


if __name__ == "__main__":
    main()
