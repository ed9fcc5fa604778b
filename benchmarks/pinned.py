"""Benchmark (not a test): what the pinned numerics cost (``--pin-numerics``: OpenBLAS's Nehalem
kernels and numpy without its SIMD loops, :mod:`study.runner.numerics`) against this machine's own
kernel, in the same run, and how far the two runs' numbers lie apart.

    python -m benchmarks.pinned                    # paper sizes: A and B, the five methods, seeds 0-9
    python -m benchmarks.pinned --long             # plus L at n = 50, T = 1500 (two seeds)
    python -m benchmarks.pinned --rounds 3         # alternate the two configurations 3 times

Each configuration runs in a fresh process (the kernel is chosen when numpy loads), single-threaded
BLAS as in a study's workers; the two alternate, ``--rounds`` times, and the CPU seconds of each
are summed.  A kernel change moves the last bits and so, at a near-tie, a replication's path: the
table counts the replications whose choices differ, as well as the cost.  Run from the repository's
root (benchmarks are not installed with the package).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKLOAD = """
import json, sys, time
import study
from study.core.threads import one_blas_thread
from study.runner.numerics import describe, numerics
jobs = json.loads(sys.argv[1])
out = {"numerics": describe(numerics()), "runs": []}
with one_blas_thread():
    for setting, method, seed, overrides in jobs:
        start = time.process_time()
        r = study.run_replication(setting, method, seed, **overrides)
        out["runs"].append({"key": [setting, method, seed], "cpu": time.process_time() - start,
                            "pairs": [int(v) for v in r.trajectory["major"]] + [int(v) for v in r.trajectory["other"]],
                            "regret": float(r.trajectory["avg_regret"][-1]),
                            "error": float(r.trajectory["rel_error"][-1])})
print(json.dumps(out))
"""


def _run(jobs, env_extra) -> dict:
    from study.runner.numerics import PIN_VARIABLE

    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", PIN_VARIABLE)}
    env.update(env_extra)
    res = subprocess.run([sys.executable, "-c", WORKLOAD, json.dumps(jobs)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(res.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="add L at n = 50, T = 1500 (seeds 1, 2)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two configurations (default 2)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per paper-size cell (default 10)")
    args = parser.parse_args(argv)
    from study.runner.numerics import pin_environment

    methods = ("RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2")
    jobs = [[s, m, seed, {}] for s in ("A", "B") for m in methods for seed in range(args.seeds)]
    if args.long:
        jobs += [["L", "RB", seed, {"n_items": 50, "T": 1500}] for seed in (1, 2)]
    configs = {"this machine's kernel": {}, "pinned": pin_environment()}
    cpu = {name: {} for name in configs}
    first = {}
    start = time.perf_counter()
    for _ in range(args.rounds):
        for name, env in configs.items():
            result = _run(jobs, env)
            first.setdefault(name, result)
            for run in result["runs"]:
                key = tuple(run["key"][:2]) if run["key"][0] != "L" else ("L", "RB n=50 T=1500")
                cpu[name][key] = cpu[name].get(key, 0.0) + run["cpu"]
    native, pinned = (first[name] for name in configs)
    print(f"this machine: {native['numerics']}\npinned:       {pinned['numerics']}")
    print(f"{len(jobs)} replications x {args.rounds} rounds, {time.perf_counter() - start:.0f} s wall\n")
    print("| cell | CPU s, this machine's kernel | CPU s, pinned | ratio |\n|---|---|---|---|")
    for key in cpu["pinned"]:
        a, b = cpu["this machine's kernel"][key], cpu["pinned"][key]
        print(f"| {'/'.join(key)} | {a:.2f} | {b:.2f} | {b / a:.2f} |")
    total_a, total_b = (sum(cpu[name].values()) for name in configs)
    print(f"| all | {total_a:.2f} | {total_b:.2f} | {total_b / total_a:.2f} |")
    differ = [a["key"] for a, b in zip(native["runs"], pinned["runs"]) if a["pairs"] != b["pairs"]]
    gaps = [max(abs(a["regret"] - b["regret"]), abs(a["error"] - b["error"]))
            for a, b in zip(native["runs"], pinned["runs"]) if a["pairs"] == b["pairs"]]
    print(f"\nreplications whose choices differ between the two: {len(differ)} of {len(jobs)} {differ[:8]}")
    print(f"largest |difference| of R(T) or the error at T where the choices agree: {max(gaps, default=0):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
