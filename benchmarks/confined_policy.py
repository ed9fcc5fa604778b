"""What kernel confinement costs a user policy: replications of RB's rule as a user policy (its own
process, forked from the policy server, confined by Landlock and seccomp, asked step by step
through the channel of :mod:`study.policies.sandbox`) against the built-in RB in the worker's own
process, through :func:`study.runner.worker.run_batch` (the path of a study's task, without Ray);
and the channel's round trip per step.

    python -m benchmarks.confined_policy [--T 1000] [--reps 6]

Both compute the same numbers (checked here); the ratios are of wall time and of CPU time per
replication, the policy server's start (once per worker process) excluded by a warm-up
replication.  The built-in and the confined replications alternate (rep 0 built-in, rep 0
confined, rep 1 built-in, ...), so that a change in the machine's load (it is shared) falls on
both alike; the ratio of the totals is printed, and the median of the per-replication ratios.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


class RBRule:
    """RB's rule as a user policy (resolved by import path in its confined process)."""

    def __init__(self, setting):
        from study.policies import make_policy
        self.inner = make_policy("RB", setting)

    def select(self, step):
        return self.inner.select(step)


class Echo:
    """Answers at once (the channel's round trip per step, nothing else)."""

    def __init__(self, setting):
        pass

    def select(self, step):
        from study.policies import random_edge
        return random_edge(step)


def _batch(method, reps, overrides, first=0):
    from study.runner.plan import make_plan
    from study.runner.worker import run_batch
    (cell,) = make_plan("regret", settings=["A"], methods=[method], reps=first + reps, overrides=overrides).cells
    start = time.perf_counter()
    result = run_batch("regret", cell, [(r, 1000 + r) for r in range(first, first + reps)])
    assert not result["failures"], result["failures"][:1]
    return time.perf_counter() - start, result["trajectory"].to_pandas()


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a live process has used, from /proc."""
    import os
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(method, r, overrides) -> tuple:
    """CPU seconds replication ``r`` costs: this process's (the loop) and, for a user policy, its
    confined process's (read from /proc before it is ended)."""
    from study.policies.sandbox import ConfinedFactory
    from study.simulation.replication import run_replication
    factory = None if method == "RB" else ConfinedFactory(method)
    start = time.process_time()
    run_replication("A", method, 1000 + r, policy=factory, **overrides)
    loop, policy = time.process_time() - start, 0.0
    if factory is not None:
        policy = sum(_cpu_of(p.pid) for p in factory.processes)
        factory.close()
    return loop, policy


def _in_process(factory, reps, overrides) -> float:
    from study.simulation.replication import run_replication
    start = time.perf_counter()
    for r in range(reps):
        run_replication("A", "echo", 1000 + r, policy=factory, **overrides)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=6)
    args = parser.parse_args(argv)
    overrides = {"T": args.T, "T0": min(200, args.T // 2)}
    user = f"{__name__ if __name__ != '__main__' else 'benchmarks.confined_policy'}:RBRule"
    _batch(user, 1, {"T": 20, "T0": 8})  # the policy server's start, paid once per worker process
    _batch("RB", 1, {"T": 20, "T0": 8})
    walls, cpus, frames = {"RB": [], user: []}, {"RB": [], user: []}, {"RB": [], user: []}
    for r in range(args.reps):  # alternating (module docstring)
        for method in ("RB", user):
            seconds, frame = _batch(method, 1, overrides, first=r)
            walls[method].append(seconds)
            frames[method].append(frame)
        for method in ("RB", user):
            cpus[method].append(_cpu(method, r, overrides))
    import pandas as pd
    rb, own = (pd.concat(frames[m], ignore_index=True) for m in ("RB", user))
    builtin, confined = sum(walls["RB"]), sum(walls[user])
    split = {m: np.sum(cpus[m], axis=0) / args.reps for m in ("RB", user)}  # (loop, policy process)
    cpus = {m: [sum(c) for c in cpus[m]] for m in cpus}
    cpu_builtin, cpu_confined = (sum(cpus[m]) / args.reps for m in ("RB", user))
    median_wall, median_cpu = (float(np.median(np.divide(d[user], d["RB"]))) for d in (walls, cpus))
    for column in ("major", "other", "regret", "rel_error"):
        assert np.array_equal(rb[column].to_numpy(), own[column].to_numpy(), equal_nan=True), column
    echo, _ = _batch(user.replace(":RBRule", ":Echo"), args.reps, overrides)
    plain = _in_process(Echo, args.reps, overrides)  # the same policy, called in the worker's process
    steps = args.reps * args.T
    print(f"Setting A, T={args.T}, {args.reps} replications (same numbers: checked)")
    print(f"  built-in RB in the worker:        {builtin / args.reps:8.3f} s a replication")
    print(f"  RB's rule as a confined policy:   {confined / args.reps:8.3f} s a replication "
          f"(x{confined / builtin:.2f}; median of the replications' ratios x{median_wall:.2f})")
    print(f"  CPU a replication (loop + policy process): built-in {cpu_builtin:.3f} s, confined "
          f"{cpu_confined:.3f} s (x{cpu_confined / cpu_builtin:.2f}; median x{median_cpu:.2f})")
    print(f"  of which, a step: the loop +{1e6 * (split[user][0] - split['RB'][0]) / args.T:.1f} us, the policy's "
          f"process {1e6 * split[user][1] / args.T:.1f} us")
    print(f"  channel round trip per step:      {1e6 * max(echo - plain, 0.0) / steps:8.1f} us "
          "(random edges, confined vs in the worker's process; a fork per replication included)")


if __name__ == "__main__":
    main()
