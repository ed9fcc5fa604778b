"""Benchmark (not a test): CPU seconds per replication at the paper study's sizes (Settings A and B,
T = 500), the current core against a reference commit of the repository in the same run, with the
ratios, a check that both give the same numbers, and the paper study's task CPU estimated from them.

    python -m benchmarks.bench --paper                       # against commit 2055c8d, 2 seeds, 2 rounds
    python -m benchmarks.bench --paper --ref 2055c8d --reps 3 --rounds 3

The reference is the package ``study`` of commit ``--ref``, exported with ``git archive`` into a
temporary directory (nothing else of the repository is touched).  Each measurement runs in a
fresh child process (``python -c``, working directory and ``PYTHONPATH`` set to the tree measured,
so that its ``study`` is the one imported), one warm-up replication first; the current and the
reference children alternate, round after round, so that the machine's load falls on both alike.
A child reports CPU seconds (``time.process_time``) per replication of each job and a digest of
every result (trajectories, intervals, final theta): equal digests mean bit-identical results.

Jobs: each method alone at the setting's M (the per-method table); the five methods together
through ``run_environment_methods`` (as the study's workers run them: ERA continues from RB at T0)
at every M of the regret study and the M-sweep; RB with CIs every 10 steps (the coverage study).
The estimate multiplies those by the study's replication counts: regret 200 per setting; coverage
500 per setting; M-sweep 200 per (setting, M) for the M values the regret study does not already
hold (A: 1, 10, 30; B: 20, 80).  It leaves out the workers' framing of the rows (0.2-0.3 ms a replication) and the
driver's Parquet writes; on ``jobs/paper.py --quick`` the task CPU the run recorded came within 10%
of the same estimate, and the idle full run at 830016a recorded 1,041 task-CPU s against its 1,088
(docs/benchmarks.md).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2")
STUDY_M = {"A": (20, 1, 10, 30), "B": (50, 20, 80)}  # the first: the setting's own (the regret study's)
REGRET_REPS, COVERAGE_REPS, MSWEEP_REPS = 200, 500, 200

CHILD = r"""
import hashlib, json, sys, time
import numpy as np
from study.simulation.environment import BTLEnvironment
from study.simulation.replication import run_environment, run_environment_methods
from study.simulation.settings import SETTINGS

def digest(results, h):
    for r in results:
        for name in sorted(r.trajectory):
            h.update(np.ascontiguousarray(r.trajectory[name]).tobytes())
        for name in sorted(r.intervals):
            h.update(np.ascontiguousarray(r.intervals[name]).tobytes())
        h.update(np.ascontiguousarray(r.theta_final).tobytes())

def run(job, seed):
    setting = SETTINGS[job["setting"]].replace(M=job["M"], ci_every=job["ci_every"])
    env = BTLEnvironment(setting, seed)
    if len(job["methods"]) == 1:
        return [run_environment(env, job["methods"][0], setting, seed=seed)]
    return list(run_environment_methods(env, job["methods"], setting, seed=seed).values())

jobs, seeds = json.loads(sys.argv[1])
run(dict(setting="A", M=20, ci_every=10, methods=["BT-UCB2"]), 10**6)  # warm-up: imports, caches
out = []
for job in jobs:
    h, cpu = hashlib.sha256(), 0.0
    for seed in seeds:
        started = time.process_time()
        results = run(job, seed)
        cpu += time.process_time() - started
        digest(results, h)
    out.append(dict(job, cpu=cpu / len(seeds), digest=h.hexdigest()[:16]))
print(json.dumps(out))
"""


def paper_jobs() -> list:
    jobs = [{"setting": s, "M": STUDY_M[s][0], "ci_every": 0, "methods": [m]} for s in STUDY_M for m in METHODS]
    jobs += [{"setting": s, "M": M, "ci_every": 0, "methods": list(METHODS)} for s in STUDY_M for M in STUDY_M[s]]
    jobs += [{"setting": s, "M": STUDY_M[s][0], "ci_every": 10, "methods": ["RB"]} for s in STUDY_M]
    return jobs


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (timings on a shared machine are read beside them)."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def export_reference(ref: str, into: Path) -> Path:
    """The package ``study`` of commit ``ref`` in ``into`` (git archive; the repository is untouched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "study"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_child(tree: Path, jobs, seeds) -> list:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([jobs, list(seeds)])], cwd=tree, env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(ref: str, seeds, rounds: int, log=print) -> dict:
    """{tree: [job dicts with cpu (mean over rounds) and digest]} for "current" and "reference"."""
    jobs = paper_jobs()
    runs = {"current": [], "reference": []}
    with tempfile.TemporaryDirectory(prefix="bench-paper-") as tmp:
        trees = {"current": ROOT, "reference": export_reference(ref, Path(tmp))}
        for r in range(rounds):
            for name in (("current", "reference") if r % 2 == 0 else ("reference", "current")):
                runs[name].append(run_child(trees[name], jobs, seeds))
                log(f"  round {r + 1}/{rounds}: {name} done", flush=True)
    merged = {}
    for name, rs in runs.items():
        merged[name] = [dict(job, cpu=sum(r[i]["cpu"] for r in rs) / len(rs),
                             same_digest=len({r[i]["digest"] for r in rs}) == 1) for i, job in enumerate(rs[0])]
    return merged


def study_cpu(jobs) -> dict:
    """Estimated task CPU of the three studies from the jobs' CPU s per replication."""
    group = {(j["setting"], j["M"]): j["cpu"] for j in jobs if len(j["methods"]) > 1}
    coverage = {j["setting"]: j["cpu"] for j in jobs if j["ci_every"] > 0}
    regret = sum(REGRET_REPS * group[s, STUDY_M[s][0]] for s in STUDY_M)
    msweep = sum(MSWEEP_REPS * group[s, M] for s in STUDY_M for M in STUDY_M[s][1:])
    cover = sum(COVERAGE_REPS * coverage[s] for s in STUDY_M)
    return {"regret": regret, "coverage": cover, "msweep": msweep, "total": regret + cover + msweep}


def print_paper(args) -> None:
    seeds = [args.seed + k for k in range(args.reps)]
    print(f"CPU s per replication, T = 500, current tree vs the study package of commit {args.ref} (same run, "
          f"fresh processes alternating), seeds {seeds}, mean of {args.rounds} rounds; load: "
          f"{load_average()} at start", flush=True)
    result = measure(args.ref, seeds, args.rounds)
    cur, ref = result["current"], result["reference"]
    print(f"{'job':34}{'current':>10}{'reference':>11}{'speed-up':>10}   identical results")
    for c, r in zip(cur, ref):
        label = (f"{c['setting']}/M={c['M']}/" + (c["methods"][0] if len(c["methods"]) == 1 else "all five")
                 + (" (CIs every 10)" if c["ci_every"] else ""))
        same = c["digest"] == r["digest"] and c["same_digest"] and r["same_digest"]
        print(f"{label:34}{c['cpu']:10.3f}{r['cpu']:11.3f}{r['cpu'] / c['cpu']:9.2f}x   {same}")
    est_cur, est_ref = study_cpu(cur), study_cpu(ref)
    print("estimated task CPU of jobs/paper.py (replications x CPU s per replication; workers' framing and "
          "Parquet writes not included):")
    for part in ("regret", "coverage", "msweep", "total"):
        print(f"  {part:9}{est_cur[part]:9.0f} s (current){est_ref[part]:9.0f} s (reference)"
              f"{est_ref[part] / est_cur[part]:8.2f}x")
    print(f"wall on 2 CPUs at parallel efficiency 0.95: {est_cur['total'] / (2 * 0.95) / 60:.1f} min from the estimate; "
          f"load at end: {os.getloadavg()[0]:.2f}", flush=True)
