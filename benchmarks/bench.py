"""Benchmark (not a test): seconds per replication of every method in Settings A and B, and, in
the same run, a naive reference estimator — scipy L-BFGS refitted from a cold start at every
step on the full trajectory, the way typical research code does it — with the speed-up ratio.

    python -m benchmarks.bench                # all methods, naive reference for RB
    python -m benchmarks.bench --naive all    # naive reference for every method (slow)
    python -m benchmarks.bench --breakdown    # where a replication's time goes, by estimation regime
    python -m benchmarks.bench --batching     # what batching replications into the same numpy calls would buy
    python -m benchmarks.bench --row-space    # stage 1's unidentified refits solved on the row space instead
    python -m benchmarks.bench --scale        # seconds per replication as n grows, current vs replaced core
    python -m benchmarks.bench --scale --long # long horizons (n = 10, 100, 1000 at T = 2000; n = 100 at T = 10000)
    python -m benchmarks.bench --paper        # the paper study's sizes: current vs a reference commit, CPU s (paper_study.py)
    python -m benchmarks.bench --regimes --ref 2565cad   # CPU per step by estimator regime, current vs a commit (regimes.py)

Run from the repository's root (the benchmarks are not installed with the package).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.linalg import lapack
from scipy.optimize import minimize
from scipy.special import expit
from threadpoolctl import threadpool_limits

from study.core.contrasts import from_reduced, to_reduced
from study.policies import METHODS
from study.simulation.environment import BTLEnvironment
from study.simulation.estimator import Estimate
from study.simulation.replication import run_environment
from study.simulation.settings import SETTINGS

from . import cores
from .paper_study import ROOT, load_average, print_paper  # ROOT: the tree itself, for the tests
from .regimes import print_regimes

PREVIOUS_COMMIT = cores.CORES["previous"].commit  # the older cores are read from git (benchmarks/cores.py)


class NaiveEstimate(Estimate):
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
    started = time.perf_counter()
    result = run_environment(env, method, setting, seed=seed, estimator=NaiveEstimate if naive else Estimate)
    return time.perf_counter() - started, result


class TimedEstimate(Estimate):
    """The study's estimator, timing each refit by regime and each debiased fit (the latest
    instance is ``TimedEstimate.last``)."""

    last = None

    def __init__(self, setting, env):
        super().__init__(setting, env)
        TimedEstimate.last = self
        self.seconds = dict.fromkeys(REGIMES, 0.0)
        self.steps = dict.fromkeys(REGIMES, 0)

    def update(self, t, major, other, x, wins, m):
        started = time.perf_counter()
        super().update(t, major, other, x, wins, m)
        if t > self.setting.T0:
            regime = "stage 2"
        elif not self.identified:
            regime = "stage 1, unidentified"
        elif self.multipliers is not None and np.any(self.multipliers > 0):
            regime = "stage 1, ball active"
        else:
            regime = "stage 1, interior"
        self.seconds[regime] += time.perf_counter() - started
        self.steps[regime] += 1

    def debias(self):
        started = time.perf_counter()
        result = super().debias()
        self.seconds["debias"] += time.perf_counter() - started
        self.steps["debias"] += 1
        return result


REGIMES = ("stage 1, unidentified", "stage 1, ball active", "stage 1, interior", "stage 2", "debias")


def breakdown(setting_name, method, seeds, M=None):
    """Mean seconds (and steps) per replication in each regime, and in total, under the study's
    setting (CIs on the grid included)."""
    setting = SETTINGS[setting_name] if M is None else SETTINGS[setting_name].replace(M=M)
    seconds = dict.fromkeys(REGIMES + ("total",), 0.0)
    steps = dict.fromkeys(REGIMES, 0)
    for seed in seeds:
        env = BTLEnvironment(setting, seed)
        started = time.perf_counter()
        run_environment(env, method, setting, seed=seed, estimator=TimedEstimate)
        seconds["total"] += time.perf_counter() - started
        for regime in REGIMES:
            seconds[regime] += TimedEstimate.last.seconds[regime]
            steps[regime] += TimedEstimate.last.steps[regime]
    count = len(seeds)
    return ({k: v / count for k, v in seconds.items()}, {k: v / count for k, v in steps.items()})


def chord_batching(replications=25, rows=300, params=90, repeats=200, seed=0):
    """Seconds per replication of one stage-2 chord iteration (margins, gradient, KKT residual,
    factor solve: the inner loop of every stage-2 refit) at Setting B's size (t = 300 rows,
    (n-1) d = 90), for ``replications`` problems solved one after another (as the core does) and
    batched into the same numpy calls (a lockstep design).  Returns (loop, batched, max |diff|)."""
    rng = np.random.default_rng(seed)
    design = 0.3 * rng.standard_normal((replications, rows, params))
    m = np.full((replications, rows), 50.0)
    wins = rng.integers(0, 51, (replications, rows)).astype(float)
    beta = 0.1 * rng.standard_normal((replications, params))
    hessian = np.einsum("ktp,ktq->kpq", design, design) + np.eye(params)
    factors = [lapack.dpotrf(h)[0] for h in hessian]
    inverses = np.linalg.inv(hessian)  # a batched design would keep explicit inverses (no batched dpotrs)
    ridge = 2.0

    def loop():
        out = np.empty_like(beta)
        for k in range(replications):
            grad = (m[k] * expit(design[k] @ beta[k]) - wins[k]) @ design[k] + ridge * beta[k]
            float(np.abs(grad).max())
            out[k] = beta[k] - lapack.dpotrs(factors[k], grad)[0]
        return out

    def batched():
        residual = m * expit(np.matmul(design, beta[:, :, None])[:, :, 0]) - wins
        grad = np.matmul(residual[:, None, :], design)[:, 0, :] + ridge * beta
        np.abs(grad).max(axis=1)
        return beta - np.matmul(inverses, grad[:, :, None])[:, :, 0]

    diff = float(np.abs(loop() - batched()).max())
    timings = []
    for fn in (loop, batched):
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
        timings.append((time.perf_counter() - started) / (repeats * replications))
    return timings[0], timings[1], diff


def row_space_fit(design, m, wins, beta_ref, tol, max_steps=100):
    """argmin of L over beta_ref + rowspace(design): the eps -> 0 limit of the tie-break, solved
    by damped Newton in an orthonormal basis of the row space (from the SVD).  Returns (beta, steps)."""
    _, singular, vt = np.linalg.svd(design, full_matrices=False)
    basis = vt[: int(np.sum(singular > 1e-9 * singular[0]))].T
    reduced = design @ basis
    u = design @ beta_ref
    coef = np.zeros(basis.shape[1])

    def loss(margins):  # separable rows send margins to +-inf: NaN there is rejected by the line search
        with np.errstate(invalid="ignore", over="ignore"):
            return float(m @ np.logaddexp(0.0, margins) - wins @ margins)

    value = loss(u)
    for step in range(max_steps):
        s = expit(u)
        grad = reduced.T @ (m * s - wins)
        if np.abs(grad).max() <= tol:
            return beta_ref + basis @ coef, step
        direction = -lapack.dpotrs(lapack.dpotrf((reduced.T * (m * s * (1 - s))) @ reduced)[0], grad)[0]
        size = 1.0
        while True:
            trial = u + size * (reduced @ direction)
            trial_value = loss(trial)
            if trial_value <= value + 1e-4 * size * float(grad @ direction) or size < 1e-12:
                break
            size *= 0.5
        coef, u, value = coef + size * direction, trial, trial_value
    return beta_ref + basis @ coef, max_steps


def row_space_trial(setting_name="B", seeds=(11, 12)):
    """The core's stage-1 refits while the data do not identify theta and no ball is active, against
    :func:`row_space_fit` from theta(t-1).  Returns (steps, core s/step, row-space s/step, mean
    Newton steps, max |theta difference| over the fits that stay inside the balls)."""
    setting = SETTINGS[setting_name].replace(ci_every=0, T=SETTINGS[setting_name].T0)
    cases = []

    class Capturing(Estimate):
        def update(self, t, *args):
            previous, before = self.theta.copy(), self.multipliers
            started = time.perf_counter()
            super().update(t, *args)
            seconds = time.perf_counter() - started
            inactive = [nu is None or not np.any(nu > 0) for nu in (before, self.multipliers)]
            if not self.identified and all(inactive):
                d = self.data
                design = np.array([d.reduced_row(k) for k in range(d.t)])
                cases.append((design, d.m[: d.t].copy(), d.wins[: d.t].copy(), previous, self.theta.copy(), seconds))

    for seed in seeds:
        run_environment(BTLEnvironment(setting, seed), "RB", setting, estimator=Capturing)
    core = trial = steps = worst = 0.0
    for design, m, wins, previous, theta, seconds in cases:
        started = time.perf_counter()
        beta, count = row_space_fit(design, m, wins, to_reduced(previous).ravel(), 1e-11 * (1 + m.sum()))
        trial += time.perf_counter() - started
        core, steps = core + seconds, steps + count
        fitted = from_reduced(beta.reshape(-1, previous.shape[1]))
        if np.linalg.norm(fitted, axis=1).max() <= setting.gamma:
            worst = max(worst, float(np.abs(fitted - theta).max()))
    n = max(len(cases), 1)
    return len(cases), core / n, trial / n, steps / n, worst


SCALE_ITEMS = (10, 20, 50, 100, 200)


def scale_setting(n_items: int):
    """The scaling workload: d = 10, M = 50, T = 300, T0 = 120, theta* ~ N(0, 1/d) per entry,
    p = 2 log(n)/n (graph redrawn until connected), theta(0) ~ N(0, 5)."""
    return SETTINGS["B"].replace(n_items=n_items, dim=10, M=50, T=300, T0=120, truth="normal",
                                 p="2log(n)/n", ci_every=0)


def scale_times(n_items, cls, seeds, method="RB"):
    """Seconds and final regret of each replication of ``method`` at ``n_items`` with estimator ``cls``."""
    setting = scale_setting(n_items)
    out = []
    for seed in seeds:
        env = BTLEnvironment(setting, seed)
        started = time.perf_counter()
        result = run_environment(env, method, setting, seed=seed, estimator=cls)
        out.append((time.perf_counter() - started, result.final_regret))
    return out


def print_scale(args):
    print("RB, d = 10, M = 50, T = 300, T0 = 120, p = 2 log(n)/n; seconds per replication (ms per step); "
          f"mean of {args.reps} replications per n for the current core; the replaced core (benchmarks/cores.py: legacy) "
          "on the first of them (speed-up on that replication)")
    print(f"{'n':>5}{'params':>8}{'current':>19}{'vs n=10':>9}{'replaced core':>20}{'vs n=10':>9}{'speed-up':>10}"
          "   R(T) current / replaced")
    base = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for n in args.items:
            seeds = [args.seed + k for k in range(args.reps)]
            new = scale_times(n, Estimate, seeds)
            mean = float(np.mean([s for s, _ in new]))
            base.setdefault("new", mean)
            setting = scale_setting(n)
            steps = setting.T / 1e3  # seconds -> ms per step
            line = f"{n:5d}{(n - 1) * setting.dim:8d}{mean:10.2f} s ({mean / steps:5.1f} ms){mean / base['new']:8.1f}x"
            if n <= args.legacy_max_n:
                (old_s, old_r), = scale_times(n, cores.estimator("legacy"), seeds[:1])
                base.setdefault("legacy", old_s)
                line += (f"{old_s:10.2f} s ({old_s / steps:5.0f} ms){old_s / base['legacy']:8.0f}x"
                         f"{old_s / new[0][0]:9.0f}x   {new[0][1]:.4f} / {old_r:.4f}")
            else:
                line += f"{'(not run)':>20}{'':9}{'':10}   {new[0][1]:.4f}"
            print(line, flush=True)


LONG_CASES = ((10, 2000), (100, 2000), (1000, 2000), (100, 10000))
# the frozen previous core is run where it takes minutes, not hours (n = 100, T = 2000: ~25 s idle)
PREVIOUS_MAX_ITEMS_TIMES_T = 200_000


def long_setting(n_items: int, T: int):
    """The long-horizon workload of issue 16: RB, d = 10, M = 50, T0 = 0.4 T, theta* ~ N(0, 1/d) per
    entry, p = 2 log(n)/n (graph redrawn until connected), theta(0) ~ N(0, 5), no CI grid."""
    return SETTINGS["B"].replace(n_items=n_items, dim=10, M=50, T=T, T0=int(0.4 * T), truth="normal",
                                 p="2log(n)/n", ci_every=0)


def _timed_in_child(n_items, T, seed, which):
    """One replication in a fresh process: (CPU s, wall s, peak RSS MB, final relative error,
    choices).  ``which`` is "current" or "previous" (the core of 549859d, benchmarks/cores.py)."""
    import resource
    setting = long_setting(n_items, T)
    env = BTLEnvironment(setting, seed)
    cls = Estimate if which == "current" else cores.estimator("previous")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu, wall = time.process_time(), time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        result = run_environment(env, "RB", setting, seed=seed, estimator=cls)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (cpu, wall, peak / 1024, (peak - baseline) / 1024, float(result.trajectory["rel_error"][-1]),
            result.trajectory["major"].copy())


def in_child(*args):
    """Run :func:`_timed_in_child` in a fresh spawned process (so peak memory is its own)."""
    import concurrent.futures
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_timed_in_child, *args).result()


LONG_CHILD = r"""
import json, sys, time
from threadpoolctl import threadpool_limits
from study.simulation.environment import BTLEnvironment
from study.simulation.replication import run_environment
from study.simulation.settings import SETTINGS
n, T, seed = json.loads(sys.argv[1])
setting = SETTINGS["B"].replace(n_items=n, dim=10, M=50, T=T, T0=int(0.4 * T), truth="normal", p="2log(n)/n", ci_every=0)
env = BTLEnvironment(setting, seed)
cpu, wall = time.process_time(), time.perf_counter()
with threadpool_limits(limits=1, user_api="blas"):
    result = run_environment(env, "RB", setting, seed=seed)
print(json.dumps([time.process_time() - cpu, time.perf_counter() - wall, float(result.trajectory["rel_error"][-1]),
                  result.trajectory["major"].tolist()]))
"""


def timed_commit(tree, n_items, T, seed):
    """One replication of :func:`long_setting` under the package ``study`` in ``tree`` (a commit exported by
    git archive), in a fresh process: (CPU s, wall s, final relative error, choices)."""
    import json
    import os
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", LONG_CHILD, json.dumps([n_items, T, seed])], cwd=tree,
                          env=dict(os.environ, PYTHONPATH=str(tree)), check=True, capture_output=True, text=True)
    cpu, wall, error, major = json.loads(proc.stdout.strip().splitlines()[-1])
    return cpu, wall, error, np.array(major)


def print_long(args):
    import tempfile
    from pathlib import Path
    from .paper_study import export_reference
    cases = [tuple(int(v) for v in case.split(":")) for case in args.cases] if args.cases else LONG_CASES
    reps = args.reps or 1
    reference = f"the package of commit {args.long_ref} (git archive)" if args.long_ref else \
        f"the previous core (benchmarks/cores.py, commit {PREVIOUS_COMMIT})"
    print(f"RB, d = 10, M = 50, T0 = 0.4 T, theta* ~ N(0, 1/d), p = 2 log(n)/n, no CI grid; {reps} replication(s) "
          f"(seeds {args.seed}-{args.seed + reps - 1}) per case, each in a fresh process; CPU seconds (wall in "
          "brackets; with several seeds the median, and the largest over the median); peak RSS of the process "
          f"(growth during the replication in brackets); {reference} on the first seed where n T <= "
          f"{args.previous_max:,}, alternating with the current tree; load {load_average()}")
    print(f"{'n':>5}{'T':>7}{'params':>8}{'current CPU s':>22}{'vs n=10':>9}{'ms/step':>9}{'peak MB':>17}"
          f"{'reference CPU s':>22}{'speed-up':>10}{'same choices':>14}{'rel. error':>12}{'max/median':>12}")
    base = None
    with tempfile.TemporaryDirectory(prefix="bench-long-") as tmp:
        tree = export_reference(args.long_ref, Path(tmp)) if args.long_ref else None
        for n, T in cases:
            runs = [in_child(n, T, args.seed + k, "current") for k in range(reps)]
            cpus = np.array([r[0] for r in runs])
            cpu = float(np.median(cpus))
            _, wall, peak, growth, error, major = runs[0]
            if n == 10 and T == cases[0][1]:
                base = cpu
            ratio = f"{cpu / base:8.1f}x" if base else f"{'':9}"
            line = (f"{n:5d}{T:7d}{(n - 1) * 10:8d}{cpu:12.1f} ({wall:6.1f})" + ratio
                    + f"{1e3 * cpu / T:9.2f}{peak:9.0f} ({growth:5.0f})")
            if n * T <= args.previous_max:
                if tree is not None:
                    old_cpu, old_wall, _, old_major = timed_commit(tree, n, T, args.seed)
                else:
                    old_cpu, old_wall, _, _, _, old_major = in_child(n, T, args.seed, "previous")
                line += (f"{old_cpu:12.1f} ({old_wall:6.1f}){old_cpu / runs[0][0]:9.1f}x"
                         f"{str(bool(np.array_equal(major, old_major))):>14}{error:12.4f}")
            else:
                line += f"{'(not run)':>22}{'':10}{'':14}{error:12.4f}"
            print(line + f"{cpus.max() / cpu:12.2f}", flush=True)
    print(f"load at the end: {load_average()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=["A", "B"], choices=sorted(SETTINGS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--naive", nargs="+", default=["RB"], help="methods to time with the naive reference, or 'all'")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--breakdown", action="store_true",
                        help="time each replication by estimation regime instead (study settings, CIs included)")
    parser.add_argument("--reps", type=int, default=None,
                        help="replications per cell for --breakdown (default 3), per n for --scale (default 2), per "
                             "case for --long (default 1), seeds for --regimes (default 10)")
    parser.add_argument("--M", type=int, nargs="+", default=None, help="M values for --breakdown (default: the setting's)")
    parser.add_argument("--batching", action="store_true",
                        help="time one stage-2 chord iteration per replication, looped vs batched")
    parser.add_argument("--row-space", action="store_true",
                        help="stage 1's unidentified refits against the eps -> 0 limit solved on the row space")
    parser.add_argument("--scale", action="store_true",
                        help="seconds per replication of RB as n grows (d = 10, T = 300), current vs replaced core")
    parser.add_argument("--items", type=int, nargs="+", default=list(SCALE_ITEMS), help="n values for --scale")
    parser.add_argument("--legacy-max-n", type=int, default=100,
                        help="--scale: time the replaced core only up to this n (it takes minutes at n = 100)")
    parser.add_argument("--long", action="store_true",
                        help="--scale at long horizons (T = 2000 and 10000), current vs the previous core (549859d)")
    parser.add_argument("--cases", nargs="+", default=None, help="--long: n:T cases (default 10:2000 100:2000 "
                        "1000:2000 100:10000)")
    parser.add_argument("--previous-max", type=int, default=PREVIOUS_MAX_ITEMS_TIMES_T,
                        help="--long: run the previous core only where n T is at most this")
    parser.add_argument("--long-ref", default=None,
                        help="--long: the reference is the study package of this commit (git archive) instead of "
                             "the previous core")
    parser.add_argument("--regimes", action="store_true",
                        help="CPU per step by estimator regime, current vs --ref (benchmarks/regimes.py; default "
                             "Setting B, RB and ETA, seeds 1-10)")
    parser.add_argument("--paper", action="store_true",
                        help="CPU s per replication at the paper study's sizes, current vs --ref (benchmarks/paper_study.py)")
    parser.add_argument("--ref", default="2055c8d", help="--paper: the reference commit")
    parser.add_argument("--tie-break", default=None, choices=["nearest", "exact"],
                        help="--regimes: stage 1's tie_break for both trees (default: the setting's)")
    parser.add_argument("--rounds", type=int, default=2, help="--paper, --regimes: rounds of alternating measurements")
    args = parser.parse_args(argv)
    if args.paper:
        args.reps = args.reps or 2
        return print_paper(args)
    if args.regimes:
        return print_regimes(args)
    if args.scale and args.long:
        return print_long(args)
    if args.scale:
        args.reps = args.reps or 2
        return print_scale(args)
    args.reps = args.reps or 3
    if args.row_space:
        with threadpool_limits(limits=1, user_api="blas"):
            for name in args.settings:
                count, core, trial, steps, worst = row_space_trial(name)
                print(f"{name}: {count} unidentified stage-1 refits without an active ball: core {core * 1e3:.2f} ms, "
                      f"row-space Newton {trial * 1e3:.2f} ms ({steps:.1f} steps); max |theta difference| {worst:.2g}")
        return None
    if args.breakdown:
        return print_breakdown(args)
    if args.batching:
        with threadpool_limits(limits=1, user_api="blas"):
            loop, batched, diff = chord_batching()
        print(f"one stage-2 chord iteration at Setting B's size (t = 300 rows, 90 parameters), 25 replications:\n"
              f"  one after another   {loop * 1e6:6.1f} us per replication\n"
              f"  batched             {batched * 1e6:6.1f} us per replication   ratio {loop / batched:.2f}"
              f"   (max |difference| {diff:.1e})")
        return None
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


def print_breakdown(args):
    short = {"stage 1, unidentified": "s1 unid", "stage 1, ball active": "s1 ball", "stage 1, interior": "s1 int",
             "stage 2": "s2", "debias": "debias"}
    print("seconds per replication by regime (steps per replication in brackets); rest = policy, "
          "environment and bookkeeping")
    print(f"{'cell':18}" + "".join(f"{short[r]:>15}" for r in REGIMES) + f"{'rest':>8}{'total':>8}")
    seeds = [args.seed + k for k in range(args.reps)]
    with threadpool_limits(limits=1, user_api="blas"):
        for name in args.settings:
            for M in (args.M or [None]):
                for method in args.methods:
                    seconds, steps = breakdown(name, method, seeds, M)
                    label = f"{name}/{method}/M={M or SETTINGS[name].M}"
                    rest = seconds["total"] - sum(seconds[r] for r in REGIMES)
                    print(f"{label:18}" + "".join(f"{seconds[r]:8.3f} ({steps[r]:4.0f})" for r in REGIMES)
                          + f"{rest:8.3f}{seconds['total']:8.3f}", flush=True)
    print("budget of the 15-minute target for jobs/paper.py (10,000 replications on 2 CPUs): "
          "2 x 900 s / 10,000 = 0.18 s per replication")


if __name__ == "__main__":
    main()
