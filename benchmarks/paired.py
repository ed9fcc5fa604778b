"""Paired replications, current core against the previous one (the core of 549859d, read from git by
:mod:`benchmarks.cores`):
the same environments, policy uniforms and method, once with each estimator, and the summaries a
study reports -- R(T), the relative error at T0 and T, the CIs' coverage at T0 and T -- with their
paired differences and Monte Carlo SEs (the estimator is the optimisation problem: a change of
solver may move individual fits within the stated tolerances, or where the previous solver did not
converge, but not the summaries beyond their Monte Carlo error).

    python -m benchmarks.paired                          # L at n = 31 (the iterative solver), T = 800, 30 seeds
    python -m benchmarks.paired --n 50 --T 1000 --reps 20

Not a test: it takes minutes.  Each replication also reports how many of its choices differ.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from study.simulation.environment import BTLEnvironment
from study.simulation.estimator import Estimate
from study.simulation.replication import run_environment
from study.simulation.settings import SETTINGS

from . import cores

PREVIOUS_COMMIT = cores.CORES["previous"].commit


def summaries(result, setting) -> dict:
    t0, T = setting.T0, setting.T
    ints = result.intervals
    grid = ints["t"]
    out = {"R(T)": result.final_regret, "error(T0)": float(result.trajectory["rel_error"][t0 - 1]),
           "error(T)": result.final_error}
    for name, t in (("CP(T0)", t0), ("CP(T)", T)):  # NaN where the CIs are not available yet
        at = grid == t
        out[name] = float(np.mean(ints["covered"][at])) if at.any() else np.nan
    return out


def paired(n_items, T, seeds, ci_every, method="RB"):
    setting = SETTINGS["L"].replace(n_items=n_items, T=T, ci_every=ci_every)
    rows = []
    for seed in seeds:
        env = BTLEnvironment(setting, seed)
        pair = {}
        for name, cls in (("previous", cores.estimator("previous")), ("current", Estimate)):
            started = time.process_time()
            with threadpool_limits(limits=1, user_api="blas"):
                result = run_environment(env, method, setting, seed=seed, estimator=cls)
            pair[name] = (result, time.process_time() - started)
        (old, old_cpu), (new, new_cpu) = pair["previous"], pair["current"]
        differ = int(np.sum((old.trajectory["major"] != new.trajectory["major"])
                            | (old.trajectory["other"] != new.trajectory["other"])))
        rows.append((summaries(old, setting), summaries(new, setting), differ, old_cpu, new_cpu))
        print(f"  seed {seed}: choices differing {differ}/{T}; CPU s previous {old_cpu:.1f}, current {new_cpu:.1f}",
              flush=True)
    return setting, rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=31)
    parser.add_argument("--T", type=int, default=800)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0, help="first seed (seeds seed, seed + 1, ...)")
    parser.add_argument("--ci-every", type=int, default=80, help="CI grid (default 80: T0 = 320 and T = 800 on it)")
    args = parser.parse_args(argv)
    seeds = list(range(args.seed, args.seed + args.reps))
    print(f"RB, setting L with n = {args.n}, T = {args.T} (T0 = 0.4 T), CIs every {args.ci_every}; seeds {seeds[0]}.."
          f"{seeds[-1]}; previous core: commit {PREVIOUS_COMMIT} (benchmarks/cores.py)", flush=True)
    setting, rows = paired(args.n, args.T, seeds, args.ci_every)
    print(f"{'summary':12}{'previous':>12}{'current':>12}{'difference':>13}{'paired SE':>11}{'|diff| / SE':>14}")
    for key in rows[0][0]:
        old = np.array([r[0][key] for r in rows])
        new = np.array([r[1][key] for r in rows])
        both = ~(np.isnan(old) | np.isnan(new))  # pairs where both have the summary (CIs available)
        old, new = old[both], new[both]
        diff = new - old
        se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else np.nan
        ratio = abs(diff.mean()) / se if se > 0 else (0.0 if diff.mean() == 0 else np.inf)
        print(f"{key:12}{old.mean():12.4f}{new.mean():12.4f}{diff.mean():13.2e}{se:11.2e}{ratio:14.2f}"
              f"   ({both.sum()} pairs)")
    differ = [r[2] for r in rows]
    print(f"replications with every choice identical: {sum(d == 0 for d in differ)} of {len(rows)}; CPU s "
          f"previous {sum(r[3] for r in rows):.0f}, current {sum(r[4] for r in rows):.0f}")


if __name__ == "__main__":
    main()
