"""Paired trajectories of two versions of the code: run a method (default RB) at a setting (default
L, n = 31, T = 800; or the paper's A or B) with the same seeds under each (the version on
``PYTHONPATH``), store each replication's choices, relative errors, final estimate and CPU seconds,
then compare the two stores.  The reference for a change of solver path against the code just
before it (``benchmarks.paired`` compares with the core of 549859d, read from git by ``benchmarks.cores``).

    mkdir /tmp/before && git archive <commit> study | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before python benchmarks/trajectories.py run --out before.npz   # that commit's study
    python benchmarks/trajectories.py run --out after.npz
    python benchmarks/trajectories.py compare before.npz after.npz
    python benchmarks/trajectories.py run --setting B --method ETA --reps 10 --seed 1 --out b.npz

(run as a file, so that ``study`` is imported from ``PYTHONPATH`` when it is set, from the
installed checkout otherwise).

Not a test: 30 replications at n = 31, T = 800 take about two CPU minutes per version.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from study.simulation.environment import BTLEnvironment
from study.simulation.replication import run_environment
from study.simulation.settings import SETTINGS


def run(n: int, T: int, seeds, out: str, setting_name: str = "L", method: str = "RB") -> None:
    import study
    print(f"study imported from {study.__file__}", flush=True)
    setting = SETTINGS[setting_name].replace(ci_every=0)
    if setting_name == "L":
        setting = setting.replace(n_items=n, T=T)
    arrays = {}
    for seed in seeds:
        env = BTLEnvironment(setting, seed)
        cpu = time.process_time()
        with threadpool_limits(limits=1, user_api="blas"):
            result = run_environment(env, method, setting, seed=seed)
        arrays[f"cpu{seed}"] = np.array(time.process_time() - cpu)
        arrays[f"major{seed}"] = result.trajectory["major"]
        arrays[f"other{seed}"] = result.trajectory["other"]
        arrays[f"error{seed}"] = result.trajectory["rel_error"]
        arrays[f"theta{seed}"] = result.theta_final
        print(f"seed {seed}: {float(arrays[f'cpu{seed}']):.1f} CPU s", flush=True)
    np.savez(out, T0=np.array(setting.T0), **arrays)


def compare(first: str, second: str) -> None:
    a, b = np.load(first), np.load(second)
    seeds = sorted(int(key[3:]) for key in a.files if key.startswith("cpu") and key in b.files)
    t0 = int(a["T0"])
    identical, stage1, stage2, differing = 0, [], [], []
    for seed in seeds:
        same = (a[f"major{seed}"] == b[f"major{seed}"]) & (a[f"other{seed}"] == b[f"other{seed}"])
        if same.all():
            identical += 1
        else:
            differing.append((seed, int((~same).sum()), int(np.argmin(same)) + 1))
        ea, eb = a[f"error{seed}"], b[f"error{seed}"]
        relative = np.abs(ea - eb) / np.maximum(np.abs(ea), 1e-300)
        stage1.append(float(relative[:t0].max()))
        stage2.append(float(relative[t0:].max()) if relative.size > t0 else 0.0)
    cpu_a = np.array([float(a[f"cpu{s}"]) for s in seeds])
    cpu_b = np.array([float(b[f"cpu{s}"]) for s in seeds])
    print(f"{len(seeds)} seeds; identical choices at every step in {identical}")
    for seed, count, step in differing:
        print(f"  seed {seed}: {count} choices differ, the first at t = {step}")
    print(f"relative error, max relative difference: stage 1 median {np.median(stage1):.1e}, max "
          f"{max(stage1):.1e}; from T0 on max {max(stage2):.1e}")
    forked = {seed for seed, _, _ in differing}
    same = [seed for seed in seeds if seed not in forked]
    if same and all(f"theta{seed}" in a.files and f"theta{seed}" in b.files for seed in same):
        final = max(float(np.abs(a[f"theta{seed}"] - b[f"theta{seed}"]).max()) for seed in same)
        print(f"final estimates of the replications with the same choices: max |difference| {final:.1e}")
    print(f"CPU s: {cpu_a.sum():.1f} and {cpu_b.sum():.1f} in all (second / first {cpu_b.sum() / cpu_a.sum():.3f}); "
          f"median {np.median(cpu_a):.2f} and {np.median(cpu_b):.2f}; max {cpu_a.max():.2f} and {cpu_b.max():.2f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/trajectories.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    runner = sub.add_parser("run")
    runner.add_argument("--setting", default="L", help="L (with --n, --T), or a paper setting, A or B")
    runner.add_argument("--method", default="RB")
    runner.add_argument("--n", type=int, default=31)
    runner.add_argument("--T", type=int, default=800)
    runner.add_argument("--reps", type=int, default=30)
    runner.add_argument("--seed", type=int, default=0, help="first seed (seeds seed, seed + 1, ...)")
    runner.add_argument("--out", required=True)
    comparer = sub.add_parser("compare")
    comparer.add_argument("first")
    comparer.add_argument("second")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.n, args.T, range(args.seed, args.seed + args.reps), args.out, args.setting, args.method)
    else:
        compare(args.first, args.second)


if __name__ == "__main__":
    main()
