"""The open horizon against the paper's fixed T (:mod:`study.online.horizon`): paired replications
(the same environment, contexts, outcome uniforms and policy uniforms: common random numbers) of
RB with the horizon known, T0 = 0.4 T and lambda_t with log T, and of the open schedule that
does not know it: epochs doubling from T_1, stage 1 up to T0 = 0.4 T_1 (all of the run when that
exceeds T), lambda_t with log H(t), the current epoch's horizon.  Reported at t = T: R(T), the
CIs' coverage CP(T), their means, the paired difference and the ratio of the R(T) means with its
paired (delta-method) SE.

    python -m benchmarks.horizon                              # A and B, T = 2000, T_1 in {T/4, 10,000}, 40 seeds
    python -m benchmarks.horizon --settings A --T 1000 --first 250 --reps 20

The simulation loop runs the open schedule through its estimator hook (RB's policy reads only T0;
the shared uniforms of a longer horizon start with those of a shorter one): the schedule the online
ranker runs with ``open_horizon=True`` (not checked here against the ranker ask for ask).  Not a
test: it takes minutes.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from study.online.horizon import at
from study.simulation.environment import BTLEnvironment
from study.simulation.estimator import Estimate
from study.simulation.replication import run_environment
from study.simulation.settings import SETTINGS


class OpenSchedule:
    """A setting whose stage-2 ridge uses the open schedule's horizon H(t) (doubling from ``first``)."""

    def __init__(self, setting, first: int):
        self._setting, self._first = setting, first

    def __getattr__(self, name):
        return getattr(self._setting, name)

    def lambda_t(self, t: int) -> float:
        s = self._setting
        return s.c_lambda * float(np.sqrt(t * s.M * np.log(max(at(self._first, True, (), t), 2)) / s.n_items))


def summaries(result, T: int) -> dict:
    ints = result.intervals
    at_T = ints["t"] == T
    return {"R(T)": float(result.final_regret),
            "CP(T)": float(np.mean(ints["covered"][at_T])) if at_T.any() else np.nan}


def paired(name: str, T: int, first: int, seeds, ci_every: int):
    base = SETTINGS[name]
    fixed = base.replace(T=T, T0=round(0.4 * T), ci_every=ci_every)
    opened = base.replace(T=T, T0=min(round(0.4 * first), T), ci_every=ci_every)
    rows = []
    for seed in seeds:
        env = BTLEnvironment(fixed, seed)  # one environment for both: contexts, truth, outcomes, uniforms
        with threadpool_limits(limits=1, user_api="blas"):
            a = run_environment(env, "RB", fixed, seed=seed)
            b = run_environment(env, "RB", opened, seed=seed,
                                estimator=lambda setting, e: Estimate(OpenSchedule(setting, first), e))
        rows.append((summaries(a, T), summaries(b, T)))
    return rows


def report(name, T, first, rows) -> dict:
    fixed = {k: np.array([r[0][k] for r in rows]) for k in rows[0][0]}
    opened = {k: np.array([r[1][k] for r in rows]) for k in rows[0][0]}
    k = len(rows)
    f, o = fixed["R(T)"], opened["R(T)"]
    ratio = o.mean() / f.mean()
    ratio_se = float(np.std(o - ratio * f, ddof=1) / np.sqrt(k) / f.mean())
    diff = o - f
    line = (f"{name}  T = {T:5d}  T_1 = {first:6d}  R(T) fixed {f.mean():8.2f} ({f.std(ddof=1) / np.sqrt(k):.2f})  "
            f"open {o.mean():8.2f} ({o.std(ddof=1) / np.sqrt(k):.2f})  diff {diff.mean():+8.2f} "
            f"({diff.std(ddof=1) / np.sqrt(k):.2f})  ratio {ratio:.3f} ({ratio_se:.3f})  "
            f"CP(T) fixed {np.nanmean(fixed['CP(T)']):.3f} open {np.nanmean(opened['CP(T)']):.3f}  [{k} pairs]")
    print(line, flush=True)
    return {"ratio": ratio, "ratio_se": ratio_se}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=["A", "B"])
    parser.add_argument("--T", type=int, default=2000)
    parser.add_argument("--first", type=int, nargs="+", default=None,
                        help="the open schedule's first horizons T_1 (default T/4 and 10,000, the default of a store)")
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    firsts = args.first or [args.T // 4, 10_000]
    seeds = range(args.seed, args.seed + args.reps)
    started = time.time()
    for name in args.settings:
        for first in firsts:
            report(name, args.T, first, paired(name, args.T, first, seeds, ci_every=args.T // 4))
    print(f"wall {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
