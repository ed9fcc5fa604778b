"""Benchmark (not a test): Ray parallel efficiency of the study engine.

    python -m benchmarks.parallel [--reps 40] [--num-cpus 2] [--set T=200 --set T0=80]

The default workload is the paper's: Setting A, RB, T = 500 (CIs every 10 steps), 40 replications.

Measures, on an embedded local Ray with K CPUs and warm workers,

* serial time: the replications run one after another in a single Ray task (one CPU);
* parallel time: the same replications through :func:`study.runner.run_study` (batching,
  gathering, Parquet writing and manifest included);

and prints efficiency = serial / (K x parallel) (1.0 is perfect; the target is >= 0.9 on 2 CPUs).
Both runs compute identical numbers (the seeds come from the same keys), which is checked.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from study import load
from study.cli import _positive_int, _set_pair
from study.results.storage import read_manifest
from study.runner import make_plan, run_study
from study.runner.worker import remote_run_batch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=_positive_int, default=40, help="replications (default 40)")
    parser.add_argument("--num-cpus", type=_positive_int, default=2, help="CPUs of the local Ray (default 2)")
    parser.add_argument("--setting", default="A", help="setting (default A)")
    parser.add_argument("--method", default="RB", help="method (default RB)")
    parser.add_argument("--set", dest="overrides", action="append", type=_set_pair, default=[],
                        metavar="KEY=VALUE", help="setting overrides (default: none, the paper's setting)")
    args = parser.parse_args(argv)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    overrides = dict(args.overrides)
    try:
        plan = make_plan("regret", settings=[args.setting], methods=[args.method], reps=args.reps,
                                overrides=overrides)
    except ValueError as exc:
        parser.error(str(exc))
    import ray

    ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        remote = remote_run_batch()
        cell = plan.cells[0]
        warm = make_plan("regret", settings=[args.setting], methods=[args.method], reps=1,
                                overrides={**overrides, "T": 12, "T0": 4}).cells[0]
        ray.get([remote.remote("bench", warm, [(0, i)], None, False, "") for i in range(4 * args.num_cpus)])

        reps_seeds = [(r, plan.seed(cell.setting, r))
                      for r in range(plan.reps)]
        t0 = time.perf_counter()
        serial = ray.get(remote.remote(plan.study, cell, reps_seeds, None, False, ""))
        serial_s = time.perf_counter() - t0

        with tempfile.TemporaryDirectory() as tmp:
            t0, c0 = time.perf_counter(), time.process_time()
            report = run_study(plan, tmp, progress=False, log=lambda m: None)
            parallel_s, driver_cpu = time.perf_counter() - t0, time.process_time() - c0
            table = load(tmp, plan.study)
            task_cpu = read_manifest(tmp, plan.study)["runs"][-1]["task_cpu_seconds"]
        if serial["failures"] or not report.ok:
            print("replications failed:", serial["failures"][:1] or report.failures[:1], file=sys.stderr)
            return 1
        same = table["avg_regret"].to_numpy().tolist() == \
            serial["trajectory"].to_pandas().sort_values(["rep", "t"])["avg_regret"].to_numpy().tolist()
    finally:
        ray.shutdown()
    eff = serial_s / (args.num_cpus * parallel_s)
    print(f"setting {args.setting}, {args.method}, overrides {overrides}, {plan.reps} replications")
    print(f"serial   (1 CPU): {serial_s:8.2f} s  ({serial_s / plan.reps:.3f} s per replication)")
    print(f"parallel ({args.num_cpus} CPUs): {parallel_s:8.2f} s  (engine: batching, gathering, Parquet)")
    print(f"identical results: {same}")
    print(f"parallel efficiency = serial / (CPUs x parallel) = {eff:.3f}")
    cpu_eff = serial["cpu_seconds"] / (task_cpu + driver_cpu)
    print(f"CPU-time efficiency = serial task CPU {serial['cpu_seconds']:.2f} s / (parallel tasks CPU "
          f"{task_cpu:.2f} s + driver CPU {driver_cpu:.2f} s) = {cpu_eff:.3f}  (insensitive to other load)")
    if os.getloadavg()[0] > args.num_cpus + 0.5:
        print(f"warning: load average {os.getloadavg()[0]:.1f} > CPUs: other processes compete, "
              "the efficiency is understated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
