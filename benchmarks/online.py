"""Benchmark (not a test): the online ranker at volume -- CPU per ask + tell as the history grows,
and what reopening a store costs -- each against a reference in the same run.

    python -m benchmarks.online --items 5 --tells 1000 20000 --horizon 20000     # the targets: 20,000 tells
    python -m benchmarks.online --items 5 50 --tells 1000 10000 100000           # the table of docs/benchmarks.md

One ranker per number of items (d = 10, RB, M = 1, T = ``--horizon`` or the largest mark plus a
window, T0 = 0.4 T, seed 1) is asked and told by a simulated judge (BTL with theta* ~ N(0, 1/d),
contexts (1, N(0, 0.5^2) x 9), the outcome's uniform keyed by the ticket) until each mark.  At each
mark:

* **per ask + tell**: the CPU (and wall) seconds of the last ``--window`` asks and tells before the
  mark, split into the shared estimator's refit (``Estimate.update``: the paper's estimator, its
  O(t d) gradient and Hessian terms) and the rest (the store's transaction and fsync, reading and
  verifying the new rows, the checkpoint, the policy) -- the references: the same numbers at the
  first mark, and the estimator's own share;
* **reopening**: a fresh ``Ranker(path)`` plus ``ranking()`` (CPU and wall, in this process), a
  read-only open plus ``ranking()``, and ``python -m study.online show FILE --no-png`` in a new
  process (wall; the start-up of ``python -m study.online --help``, interpreter and imports, is
  given beside it) -- against the time the tells took
  (CPU of the whole loop so far), and, with ``--replay-reference`` (at marks up to 20,000), against
  a reopening that refits the whole history (as the code before checkpoints did).

The store lives in ``--out`` (default: a temporary directory); ``--out`` also gets
``online.csv``.  Run from the repository's root (the benchmarks are not installed).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from study.online import Ranker, snapshot
from study.simulation import estimator

DIM = 10


class Meter:
    """CPU and wall seconds of the estimator's refits (Estimate.update), accumulated while on."""

    def __init__(self):
        self.cpu = self.wall = 0.0
        original = estimator.Estimate.update
        meter = self

        def timed(self, *args, **kwargs):
            c, w = time.process_time(), time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                meter.cpu += time.process_time() - c
                meter.wall += time.perf_counter() - w

        estimator.Estimate.update = timed


class Judge:
    def __init__(self, n: int, seed: int = 1):
        rng = np.random.default_rng([seed, n])
        self.truth = rng.normal(0.0, 1.0 / np.sqrt(DIM), (n, DIM))
        self.contexts = rng

    def context(self) -> np.ndarray:
        return np.r_[1.0, self.contexts.normal(0.0, 0.5, DIM - 1)]

    def outcome(self, ticket) -> int:
        x = np.asarray(ticket.x)
        p = 1.0 / (1.0 + np.exp(-x @ (self.truth[ticket.other] - self.truth[ticket.major])))
        return int(np.random.default_rng([7, ticket.id]).random() < p)


def reopen_costs(path, replay_reference: bool) -> dict:
    c, w = time.process_time(), time.perf_counter()
    with Ranker(path) as ranker:
        ranker.ranking()
    out = {"reopen_cpu": time.process_time() - c, "reopen_wall": time.perf_counter() - w}
    c, w = time.process_time(), time.perf_counter()
    with Ranker(path, readonly=True) as ranker:
        ranker.ranking()
    out.update(readonly_cpu=time.process_time() - c, readonly_wall=time.perf_counter() - w)
    w = time.perf_counter()
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(path), "--no-png"],
                           capture_output=True, text=True)
    out["show_wall"] = time.perf_counter() - w if shown.returncode == 0 else float("nan")
    w = time.perf_counter()  # the reference: the interpreter's start-up and the package's imports alone
    subprocess.run([sys.executable, "-m", "study.online", "--help"], capture_output=True)
    out["startup_wall"] = time.perf_counter() - w
    out["replay_cpu"] = out["replay_wall"] = float("nan")
    if replay_reference:
        real = snapshot.fingerprint
        snapshot.fingerprint = lambda: "a reference that refits the history"
        copy = Path(f"{path}.replay.sqlite")
        copy.write_bytes(Path(path).read_bytes())
        try:
            c, w = time.process_time(), time.perf_counter()
            with Ranker(copy) as ranker:
                ranker.ranking()
            out.update(replay_cpu=time.process_time() - c, replay_wall=time.perf_counter() - w)
        finally:
            snapshot.fingerprint = real
            for suffix in ("", "-wal", "-shm"):
                Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return out


def run(n: int, marks, horizon: int, window: int, folder: Path, replay_reference: bool, say=print) -> list:
    meter = Meter()
    judge = Judge(n)
    path = folder / f"online_n{n}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    ranker = Ranker(path, n_items=n, dim=DIM, T=horizon, seed=1)
    rows, told = [], 0
    loop_cpu, loop_wall = 0.0, 0.0
    for mark in marks:
        start_window = mark - window
        while told < mark:
            if told == start_window:
                meter.cpu = meter.wall = 0.0
                c0, w0 = time.process_time(), time.perf_counter()
            c, w = time.process_time(), time.perf_counter()
            ticket = ranker.ask(judge.context())
            ranker.tell(ticket, judge.outcome(ticket))
            loop_cpu += time.process_time() - c
            loop_wall += time.perf_counter() - w
            told += 1
        cpu, wall = (time.process_time() - c0) / window, (time.perf_counter() - w0) / window
        row = {"items": n, "tells": mark, "T": horizon, "cpu_ms": 1e3 * cpu, "wall_ms": 1e3 * wall,
               "estimator_cpu_ms": 1e3 * meter.cpu / window, "rest_cpu_ms": 1e3 * (cpu - meter.cpu / window),
               "loop_cpu": loop_cpu, "loop_wall": loop_wall, "load": os.getloadavg()[0]}
        ranker.close()
        row.update(reopen_costs(path, replay_reference and mark <= 20_000))
        ranker = Ranker(path)
        row["store_mb"] = path.stat().st_size / 2 ** 20
        rows.append(row)
        say(line(row, rows[0]))
    ranker.close()
    return rows


HEADER = ("items   tells  CPU ms/ask+tell (vs first)  estimator  rest  | reopen+ranking s  (% of telling)  "
          "read-only s  show s (start-up)  refit-all s  load")


def line(row, first) -> str:
    return (f"{row['items']:5d} {row['tells']:7d}  {row['cpu_ms']:8.2f} ({row['cpu_ms'] / first['cpu_ms']:5.2f}x)"
            f"          {row['estimator_cpu_ms']:7.2f}  {row['rest_cpu_ms']:5.2f} | {row['reopen_wall']:7.3f}"
            f"           ({100 * row['reopen_cpu'] / row['loop_cpu']:5.2f}%)      {row['readonly_wall']:7.3f}"
            f"  {row['show_wall']:6.2f} ({row['startup_wall']:4.2f})  {row['replay_wall']:9.2f}  {row['load']:4.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--tells", type=int, nargs="+", default=[1000, 10_000, 100_000], help="the marks")
    parser.add_argument("--horizon", type=int, help="T (default: the largest mark)")
    parser.add_argument("--window", type=int, default=200, help="asks and tells timed before each mark")
    parser.add_argument("--replay-reference", action="store_true",
                        help="also time a reopening that refits the whole history (marks up to 20,000)")
    parser.add_argument("--out", type=Path, help="where the stores and online.csv go (default: a temporary directory)")
    args = parser.parse_args(argv)
    marks = sorted(set(args.tells))
    if args.window > marks[0] or any(b - a < args.window for a, b in zip(marks, marks[1:])):
        parser.error("--window must not exceed the first mark nor the gap between two marks")
    horizon = args.horizon or marks[-1]
    if horizon < marks[-1]:
        parser.error("--horizon must be at least the largest mark")
    folder = args.out or Path(tempfile.mkdtemp(prefix="online_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"d = {DIM}, RB, M = 1, T = {horizon}, T0 = {2 * horizon // 5}, window {args.window}; stores in {folder}")
    print(HEADER, flush=True)
    rows = []
    for n in args.items:
        rows += run(n, marks, horizon, args.window, folder, args.replay_reference,
                    say=lambda text: print(text, flush=True))
    with open(folder / "online.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {folder / 'online.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
