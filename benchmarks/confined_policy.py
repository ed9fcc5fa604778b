"""What kernel confinement costs a user policy: replications of RB's rule as a user policy (its own
process, forked from the policy server, confined by Landlock and seccomp, asked step by step
through the channel of :mod:`study.policies.sandbox`) against the built-in RB in the worker's own
process, through :func:`study.runner.worker.run_batch` (the path of a study's task, without Ray);
and the channel's round trip per step.

    python -m benchmarks.confined_policy [--setting A] [--T 1000] [--reps 6] [--variants polling,same-cpu]
    python -m benchmarks.confined_policy --saturated [--rounds 4] [--reps 3] [--variants polling,blocking]

Both compute the same numbers (checked here); the ratios are of wall time and of CPU time per
replication, the policy server's start (once per worker process) excluded by a warm-up
replication.  The built-in and the confined replications alternate (rep 0 built-in, rep 0
confined, rep 1 built-in, ...), so that a change in the machine's load (it is shared) falls on
both alike; the ratio of the totals is printed, and the median of the per-replication ratios.

``--variants`` compares ways of waiting for the policy's answer in the same run, alternating with
the built-in replications (rep 0 built-in, rep 0 of each variant, rep 1 built-in, ...):
``polling`` (the default: the trusted side polls for :data:`study.policies.sandbox.SPIN_SECONDS`,
then blocks), ``blocking`` (it blocks at once), and ``same-cpu`` / ``same-cpu-blocking`` (the
same, with the policy's process pinned to the CPU the loop runs on when it is forked), ``pinned-pair``
/ ``pinned-pair-polling`` (the loop's thread pinned there too for the replication, then restored).
The pinning is done here, around the library's code, which pins nothing.

``--saturated`` measures what a study pays, where every CPU runs a replication: as many worker
processes as CPUs each run ``--reps`` replications, all of the built-in RB, then all of each
variant, for ``--rounds`` rounds (the order alternating as above); the cost is the ratio of the
makespans (the wall time until the last worker is done), per round and in total.  Here the
confined policy's process and the loop compete for the CPUs with the other workers, so the extra
CPU a step costs is paid in wall time.
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


# name: (SPIN_SECONDS, None for the default; what is pinned to the loop's CPU: nothing, the policy's
# process, or both it and the loop's thread for the replication)
VARIANTS = {"polling": (None, None), "blocking": (0.0, None), "same-cpu": (None, "child"),
            "same-cpu-blocking": (0.0, "child"), "pinned-pair": (0.0, "both"), "pinned-pair-polling": (None, "both")}
_PLAIN = []  # _Process.__init__ and close as the library has them


def _this_cpu() -> int:
    """The CPU this thread runs on now (field 39 of its stat)."""
    with open("/proc/thread-self/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[36])


def _use(variant: str) -> None:
    """Set the variant for the confined replications that follow.  The pinning is the benchmark's,
    around the library's _Process (measured, it did not pay: docs/baselines.md, "Cost")."""
    import os
    import threading

    from study.policies import sandbox
    if not _PLAIN:
        _PLAIN.extend((sandbox.SPIN_SECONDS, sandbox._Process.__init__, sandbox._Process.close))
    spin, pin = VARIANTS[variant]
    default_spin, init, close = _PLAIN
    sandbox.SPIN_SECONDS = default_spin if spin is None else spin

    def pinned_init(self, *args, **kwargs):
        self.restore = None
        init(self, *args, **kwargs)
        if self.pidfd is None:
            return
        cpu = _this_cpu()
        os.sched_setaffinity(self.pid, {cpu})  # the policy's process, to where the loop runs now
        if pin == "both":  # the loop's thread too, until close()
            tid = threading.get_native_id()
            self.restore = (tid, os.sched_getaffinity(tid))
            os.sched_setaffinity(tid, {cpu})

    def pinned_close(self):
        close(self)
        if getattr(self, "restore", None) is not None:
            os.sched_setaffinity(*self.restore)
            self.restore = None

    sandbox._Process.__init__ = init if pin is None else pinned_init
    sandbox._Process.close = close if pin is None else pinned_close


SETTING = ["A"]  # the setting of every replication (--setting)


_CELLS: dict = {}  # (setting, method, overrides): its cell (a user policy's plan describes it in a confined process)
CELL_REPS = 100_000


def _batch(method, reps, overrides, first=0):
    from study.runner.plan import make_plan
    from study.runner.worker import run_batch
    key = (SETTING[0], method, tuple(sorted(overrides.items())))
    if key not in _CELLS:
        (_CELLS[key],) = make_plan("regret", settings=SETTING, methods=[method], reps=CELL_REPS,
                                   overrides=overrides).cells
    cell = _CELLS[key]
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
    run_replication(SETTING[0], method, 1000 + r, policy=factory, **overrides)
    loop, policy = time.process_time() - start, 0.0
    if factory is not None:
        policy = sum(_cpu_of(p.pid) for p in factory.processes)
        factory.close()
    return loop, policy


def _in_process(factory, reps, overrides) -> float:
    from study.simulation.replication import run_replication
    start = time.perf_counter()
    for r in range(reps):
        run_replication(SETTING[0], "echo", 1000 + r, policy=factory, **overrides)
    return time.perf_counter() - start


def _worker_batch(job) -> float:
    """In a worker process of --saturated: wall seconds of ``reps`` replications of ``variant``."""
    variant, reps, first, overrides = job
    if variant != "RB":
        _use(variant)
    return _batch("RB" if variant == "RB" else _USER, reps, overrides, first=first)[0]


_USER = "benchmarks.confined_policy:RBRule"


def _worker_start(setting: str, overrides: dict, ready) -> None:
    """A worker of --saturated: the policy server's start and the first calls' imports paid, then
    it waits until every worker has (so that no round pays them)."""
    SETTING[0] = setting
    _batch(_USER, 1, {"T": 20, "T0": 8})
    _batch("RB", 1, {"T": 20, "T0": 8})
    for method in (_USER, "RB"):  # their cells, planned before the clock runs
        _batch(method, 1, overrides)
    ready.wait()


def saturated(setting: str, T: int, reps: int, rounds: int, variants: list, workers=None) -> dict:
    """{variant: [makespan of each round]} with ``workers`` (default: the CPUs) processes each
    running ``reps`` replications of it (module docstring); "RB" is the built-in."""
    import multiprocessing
    import os
    workers = workers or os.cpu_count()
    overrides = {"T": T, "T0": min(200, T // 2)}
    names = ["RB", *variants]
    spans = {name: [] for name in names}
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as Ray's workers are
    ready = context.Barrier(workers)
    with context.Pool(workers, initializer=_worker_start, initargs=(setting, overrides, ready)) as pool:
        pool.map(abs, range(workers))  # returns once a worker is past the barrier: all are
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                start = time.perf_counter()
                pool.map(_worker_batch, [(name, reps, 1000 * k + reps * r, overrides) for k in range(workers)],
                         chunksize=1)
                spans[name].append(time.perf_counter() - start)
    return spans


def _print_saturated(spans: dict, setting: str, T: int, reps: int, workers: int) -> None:
    base = spans["RB"]
    print(f"Setting {setting}, T={T}, saturated: {workers} worker processes x {reps} replications, "
          f"{len(base)} rounds")
    print(f"  built-in RB: makespan {np.mean(base):.2f} s a round")
    for name, values in spans.items():
        if name == "RB":
            continue
        ratios = ", ".join(f"x{a / b:.2f}" for a, b in zip(values, base))
        print(f"  RB's rule as a confined policy ({name}): makespan {np.mean(values):.2f} s a round, "
              f"x{sum(values) / sum(base):.2f} in total (rounds {ratios})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", default="A", help="the paper's setting (A or B)")
    parser.add_argument("--T", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--variants", default="polling",
                        help=f"comma-separated, of {', '.join(VARIANTS)} (module docstring)")
    parser.add_argument("--saturated", action="store_true",
                        help="every CPU runs replications: compare makespans (module docstring)")
    parser.add_argument("--rounds", type=int, default=4, help="--saturated: rounds of the comparison")
    parser.add_argument("--workers", type=int, default=None, help="--saturated: worker processes (default: CPUs)")
    args = parser.parse_args(argv)
    SETTING[0] = args.setting
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    if args.setting not in ("A", "B"):
        parser.error(f"--setting: {args.setting!r} is not a setting of the paper (A or B)")
    if args.saturated:
        import os
        workers = args.workers or os.cpu_count()
        spans = saturated(args.setting, args.T, args.reps, args.rounds, variants, workers)
        _print_saturated(spans, args.setting, args.T, args.reps, workers)
        return
    overrides = {"T": args.T, "T0": min(200, args.T // 2)}
    user = f"{__name__ if __name__ != '__main__' else 'benchmarks.confined_policy'}:RBRule"
    _batch(user, 1, {"T": 20, "T0": 8})  # the policy server's start, paid once per worker process
    _batch("RB", 1, {"T": 20, "T0": 8})
    for method in ("RB", user):  # the CPU measurement's own path's first call (its imports and caches: 0.2 s)
        _cpu(method, 10**6, {"T": 20, "T0": 8})
    names = ["RB", *variants]
    walls, cpus, frames = ({m: [] for m in names} for _ in range(3))
    for r in range(args.reps):  # alternating (module docstring)
        for name in names:
            if name != "RB":
                _use(name)
            seconds, frame = _batch("RB" if name == "RB" else user, 1, overrides, first=r)
            walls[name].append(seconds)
            frames[name].append(frame)
        for name in names:
            if name != "RB":
                _use(name)
            cpus[name].append(_cpu("RB" if name == "RB" else user, r, overrides))
    _use("polling")
    import pandas as pd
    frames = {m: pd.concat(frames[m], ignore_index=True) for m in names}
    for name in variants:
        for column in ("major", "other", "regret", "rel_error"):
            assert np.array_equal(frames["RB"][column].to_numpy(), frames[name][column].to_numpy(),
                                  equal_nan=True), column
    split = {m: np.sum(cpus[m], axis=0) / args.reps for m in names}  # (loop, policy process)
    cpus = {m: [sum(c) for c in cpus[m]] for m in names}
    builtin, cpu_builtin = sum(walls["RB"]), sum(cpus["RB"]) / args.reps
    print(f"Setting {args.setting}, T={args.T}, {args.reps} replications (same numbers: checked)")
    print(f"  built-in RB in the worker:        {builtin / args.reps:8.3f} s a replication, "
          f"CPU {cpu_builtin:.3f} s")
    for name in variants:
        confined, cpu_confined = sum(walls[name]), sum(cpus[name]) / args.reps
        median_wall, median_cpu = (float(np.median(np.divide(d[name], d["RB"]))) for d in (walls, cpus))
        print(f"  RB's rule as a confined policy ({name}):")
        print(f"    wall {confined / args.reps:8.3f} s a replication "
              f"(x{confined / builtin:.2f}; median of the replications' ratios x{median_wall:.2f})")
        print(f"    CPU a replication (loop + policy process) {cpu_confined:.3f} s "
              f"(x{cpu_confined / cpu_builtin:.2f}; median x{median_cpu:.2f})")
        print(f"    of which, a step: the loop +{1e6 * (split[name][0] - split['RB'][0]) / args.T:.1f} us, the "
              f"policy's process {1e6 * split[name][1] / args.T:.1f} us")
    echo, _ = _batch(user.replace(":RBRule", ":Echo"), args.reps, overrides)
    plain = _in_process(Echo, args.reps, overrides)  # the same policy, called in the worker's process
    steps = args.reps * args.T
    print(f"  channel round trip per step:      {1e6 * max(echo - plain, 0.0) / steps:8.1f} us "
          "(random edges, polling, confined vs in the worker's process; a fork per replication included)")


if __name__ == "__main__":
    main()
