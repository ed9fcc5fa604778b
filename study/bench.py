"""Benchmark (not a test): seconds per replication of every method in Settings A and B, and, in
the same run, a naive reference estimator — scipy L-BFGS refitted from a cold start at every
step on the full trajectory, the way typical research code does it — with the speed-up ratio.

    python -m study.bench                # all methods, naive reference for RB
    python -m study.bench --naive all    # naive reference for every method (slow)
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from . import replication
from .environment import BTLEnvironment
from .settings import METHODS, SETTINGS


class NaiveEstimate(replication.Estimate):
    """Cold-start L-BFGS refit of the same objectives (stage 1: box |theta_ik| <= gamma/sqrt(d),
    the usual L-BFGS-B stand-in for the ball; stage 2: ridge), loss and gradient vectorised."""

    def update(self, t, major, other, x, wins, m):
        s, data = self.setting, self.data
        data.append(major, other, x, wins, m)
        n, d = self.theta.shape
        ridge = 0.0 if t <= s.T0 else s.lambda_t(t)

        def loss(flat):
            theta = flat.reshape(n, d)
            u = data.margins(theta)
            return (data.nll(theta, u) + 0.5 * ridge * flat @ flat,
                    (data.gradient(theta, u) + ridge * theta).ravel())

        bounds = [(-s.gamma / np.sqrt(d), s.gamma / np.sqrt(d))] * (n * d) if t <= s.T0 else None
        res = minimize(loss, np.zeros(n * d), jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": 2000, "ftol": 1e-12, "gtol": 1e-8})
        theta = res.x.reshape(n, d)
        self.theta = theta - theta.mean(axis=0)


def time_replication(setting_name, method, seed, naive=False):
    setting = SETTINGS[setting_name].replace(ci_every=0)
    env = BTLEnvironment(setting, seed)
    original = replication.Estimate
    if naive:
        replication.Estimate = NaiveEstimate
    try:
        started = time.perf_counter()
        result = replication.run_environment(env, method, setting, seed=seed)
        return time.perf_counter() - started, result
    finally:
        replication.Estimate = original


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=["A", "B"], choices=sorted(SETTINGS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--naive", nargs="+", default=["RB"], help="methods to time with the naive reference, or 'all'")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    naive_methods = list(METHODS) if args.naive == ["all"] else args.naive
    print(f"{'setting':8}{'method':10}{'ours (s)':>10}{'naive (s)':>11}{'ratio':>8}   R(T) ours/naive")
    with threadpool_limits(limits=1, user_api="blas"):
        for name in args.settings:
            for method in args.methods:
                ours, result = time_replication(name, method, args.seed)
                line = f"{name:8}{method:10}{ours:10.2f}"
                if method in naive_methods:
                    slow, naive_result = time_replication(name, method, args.seed, naive=True)
                    line += f"{slow:11.2f}{slow / ours:8.1f}   {result.final_regret:.3f}/{naive_result.final_regret:.3f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
