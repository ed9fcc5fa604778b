"""Benchmark (not a test): CPU per step in each estimator regime, from what every replication records
(``ReplicationResult.cost``), for the current tree and a reference commit of the repository in the
same run: stage 1 at the tie-broken point, with the exact opt1 once active balls identify theta,
once the data identify theta, and stage 2; and the ratio of stage 1's CPU per step to stage 2's.

    python -m benchmarks.bench --regimes --ref 2565cad                      # Setting B, RB and ETA, seeds 1-10
    python -m benchmarks.bench --regimes --ref 2565cad --settings A --methods RB ETA BT-UCB1 --rounds 3
    python -m benchmarks.bench --regimes --ref ca59dcc --tie-break exact    # stage 1's exact nearest argmin

The reference is the package ``study`` of commit ``--ref`` exported with ``git archive``
(:func:`benchmarks.paper_study.export_reference`); each side runs in fresh child processes (one BLAS
thread) that alternate round by round, so that the machine's load falls on both alike; the table
gives, per regime, the smallest CPU per step of the rounds (the least disturbed measurement) and
the steps per replication.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .paper_study import ROOT, export_reference, load_average

REGIMES = ("tie_break", "exact_balls", "identified", "stage2")
STAGE1 = REGIMES[:3]

CHILD = r"""
import json, sys
from threadpoolctl import threadpool_limits
import study
setting, methods, seeds, overrides = json.loads(sys.argv[1])
total = {}
with threadpool_limits(limits=1, user_api="blas"):
    study.run_replication(setting, methods[0], seed=10**6, T=60, T0=24)  # warm-up: imports, caches
    for method in methods:
        for seed in seeds:
            for key, value in study.run_replication(setting, method, seed=seed, **overrides).cost.items():
                total[key] = total.get(key, 0) + value
print(json.dumps(total))
"""


def run_child(tree: Path, setting: str, methods, seeds, overrides=None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([setting, list(methods), list(seeds), overrides or {}])],
                          cwd=tree,
                          env=env, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def per_step(total: dict) -> dict:
    """CPU microseconds per step in each regime, in stage 1 as a whole, and replications' steps."""
    out = {r: 1e6 * total[f"cpu_{r}"] / total[f"steps_{r}"] if total[f"steps_{r}"] else 0.0 for r in REGIMES}
    steps1 = sum(total[f"steps_{r}"] for r in STAGE1)
    out["stage1"] = 1e6 * sum(total[f"cpu_{r}"] for r in STAGE1) / steps1 if steps1 else 0.0
    return out


def measure(ref: str, setting: str, methods, seeds, rounds: int, log=print, overrides=None) -> dict:
    runs = {"current": [], "reference": []}
    with tempfile.TemporaryDirectory(prefix="bench-regimes-") as tmp:
        trees = {"current": ROOT, "reference": export_reference(ref, Path(tmp))}
        for r in range(rounds):
            for name in (("current", "reference") if r % 2 == 0 else ("reference", "current")):
                runs[name].append(run_child(trees[name], setting, methods, seeds, overrides))
                log(f"  round {r + 1}/{rounds}: {name} done", flush=True)
    return runs


def print_regimes(args) -> None:
    from study.policies import METHODS
    seeds = list(range(args.seed, args.seed + (args.reps or 10)))
    methods = ["RB", "ETA"] if args.methods == list(METHODS) else args.methods  # bench's default: every method
    tie_break = args.tie_break or "the setting's"
    for setting in ["B"] if args.settings == ["A", "B"] else args.settings:
        print(f"Setting {setting}, {' and '.join(methods)}, seeds {seeds[0]}-{seeds[-1]}, one BLAS thread: CPU per "
              f"step by regime (r.cost), current tree vs the study package of commit {args.ref}, fresh processes "
              f"alternating, the least of {args.rounds} rounds; tie_break: {tie_break}; load {load_average()}",
              flush=True)
        overrides = {"tie_break": args.tie_break} if args.tie_break else {}
        runs = measure(args.ref, setting, methods, seeds, args.rounds, overrides=overrides)
        best = {name: {key: min(per_step(t)[key] for t in totals) for key in REGIMES + ("stage1",)}
                for name, totals in runs.items()}
        count = len(methods) * len(seeds)
        print(f"{'regime':22}{'steps/rep':>10}{'current us':>12}{'reference us':>14}{'current/ref':>13}")
        for key in REGIMES + ("stage1",):
            steps = (sum(runs["current"][0][f"steps_{r}"] for r in STAGE1) if key == "stage1"
                     else runs["current"][0][f"steps_{key}"]) / count
            cur, ref = best["current"][key], best["reference"][key]
            print(f"{key:22}{steps:10.1f}{cur:12.1f}{ref:14.1f}{cur / ref if ref else float('nan'):13.2f}")
        total = {name: min(t["cpu_seconds"] for t in totals) / count for name, totals in runs.items()}
        print(f"{'replication (CPU s)':22}{'':10}{total['current']:12.4f}{total['reference']:14.4f}"
              f"{total['current'] / total['reference']:13.2f}")
        for name in ("current", "reference"):
            print(f"stage 1 / stage 2 per step, {name}: {best[name]['stage1'] / best[name]['stage2']:.2f}")
        print(f"load at the end: {load_average()}", flush=True)
