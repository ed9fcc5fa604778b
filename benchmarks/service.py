"""Benchmark (not a test): the ranker as a service under load, against in-process tells in the same
run, and its kill -9 fault run.

    python -m benchmarks.service                          # the targets: 8 judges, 10,000 tells, n = 10, d = 10
    python -m benchmarks.service --kills 10               # the fault run: 10 kill -9 of the server under load

Each run makes fresh stores (RB, n = ``--items``, d = ``--dim``, T = tells + slack, seed 1) and a
simulated judge (BTL with theta* ~ N(0, 1/d), contexts (1, N(0, 0.5^2) x (d - 1)), the outcome's
uniform keyed by the ticket).  Every comparison is made in alternating blocks (``--blocks``, 10 by
default: in-process, then over HTTP, then in-process again, ...; the stores of both sides grow
together), so that both sides meet the same machine, however its load changes during the run:

* **in-process**: the loop of ``Ranker.ask`` + ``Ranker.tell`` in this process, ``--tells`` of them:
  the reference (tells per second; p50 and p99 of each tell and each ask);
* **one judge over HTTP**: the same loop through :class:`study.online.Client` against ``python -m
  study.online serve`` (a separate process): the same latencies as seen by the judge (request sent
  to answer decoded).  *Added per tell* = its p50 tell latency minus the in-process p50 (blocks
  alternating with it): what HTTP, JSON, authentication, validation and the hand-over to the
  ranker's thread add to one tell (no waiting for other judges);
* **``--judges`` judges over HTTP**: that many judge processes share ``--tells`` ask + tell loops
  against one server, a block at a time (all start together and wait for each other at the block's
  end), alternating with blocks of an in-process loop: throughput (tells per second, over the
  blocks' time) and the judges' p50 and p99 latencies, which include waiting for the other judges'
  asks and tells (the store takes one at a time, as it does for several in-process writers);
  *capacity cost per tell* = 1 / (its throughput) - 1 / (the in-process throughput);
* the **CPU** per ask + tell of each side (the server's read from /proc): what the load changes least.

``--kills K``: instead, the fault run: ``--judges`` judges tell ``--tells`` outcomes while the server
is killed with SIGKILL K times, at K random points of the run (once the store has told a number
of outcomes drawn uniformly from 1 .. tells - 1, plus 0-50 ms: anywhere in the requests in
flight), and restarted at once on the same port (the judges' clients retry:
:mod:`study.online.service.client`).  Then:
every tell a judge saw acknowledged (2xx, or a retry recognised as recorded) is in the store once,
with its outcome, and no other tell is; the continued store passes ``verify --replay`` (the stored
estimate and checkpoint are the refitted history's, bit for bit).  Exit status 1 if not.

Timings depend on the machine's load (printed with each number); run it on an idle machine for the
record.  Run from the repository's root (the benchmarks are not installed).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from study.online import Client, Ranker, verify_store

TOKEN = "benchmark-token-0123456789abcdef"


class Judge:
    """A simulated judge: contexts from its own stream, outcomes keyed by the ticket."""

    def __init__(self, n: int, dim: int, stream: int = 0):
        self.truth = np.random.default_rng([1, n, dim]).normal(0.0, 1.0 / np.sqrt(dim), (n, dim))
        self.contexts = np.random.default_rng([2, stream])
        self.dim = dim

    def context(self) -> np.ndarray:
        return np.r_[1.0, self.contexts.normal(0.0, 0.5, self.dim - 1)]

    def outcome(self, ticket) -> int:
        x = np.asarray(ticket.x)
        p = 1.0 / (1.0 + np.exp(-x @ (self.truth[ticket.other] - self.truth[ticket.major])))
        return int(np.random.default_rng([7, ticket.id]).random() < p)


def loop(ranker, judge: Judge, tells: int, acks=None) -> dict:
    """``tells`` asks and tells; their latencies (seconds), the wall-clock span and this process's CPU."""
    ask, tell = np.empty(tells), np.empty(tells)
    start, cpu = time.monotonic(), time.process_time()
    for k in range(tells):
        t0 = time.perf_counter()
        ticket = ranker.ask(judge.context())
        t1 = time.perf_counter()
        wins = judge.outcome(ticket)
        ranker.tell(ticket, wins)
        t2 = time.perf_counter()
        ask[k], tell[k] = t1 - t0, t2 - t1
        if acks is not None:
            acks.write(f"{ticket.id} {wins}\n")
            acks.flush()
    return {"ask": ask, "tell": tell, "start": start, "end": time.monotonic(), "cpu": time.process_time() - cpu}


def judge_process(url: str, n: int, dim: int, stream: int, shares: list, out: str, barrier=None) -> None:
    """One judge over HTTP (a process of its own), ``shares[b]`` asks and tells in block b (with a
    ``barrier``, all judges and the controller start and end each block together): its latencies
    to ``out``.npz, acknowledged tells to ``out``.acks as they come."""
    judge, results = Judge(n, dim, stream), []
    with Client(url, token=TOKEN, retry_for=120.0) as client, open(f"{out}.acks", "w") as acks:
        for share in shares:
            if barrier is not None:
                barrier.wait()
            results.append(loop(client, judge, share, acks))
            if barrier is not None:
                barrier.wait()
    np.savez(out, ask=np.concatenate([r["ask"] for r in results]), tell=np.concatenate([r["tell"] for r in results]),
             span=[results[0]["start"], results[-1]["end"]], cpu=sum(r["cpu"] for r in results),
             recorded_on_retry=client.recorded_on_retry)


class Server:
    """``python -m study.online serve`` in a process of its own (started, killed, restarted)."""

    def __init__(self, store: Path, n: int, dim: int, T: int, port: int = 0):
        self.store, self.port, self.process = store, port, None
        self.arguments = ["--n-items", str(n), "--dim", str(dim), "--T", str(T), "--seed", "1"]

    def start(self) -> str:
        env = {**os.environ, "STUDY_ONLINE_TOKEN": TOKEN}
        self.process = subprocess.Popen([sys.executable, "-m", "study.online", "serve", str(self.store), "--port",
                                         str(self.port), *self.arguments], stdout=subprocess.PIPE, env=env, text=True)
        line = self.process.stdout.readline()
        if " at http://" not in line:
            raise RuntimeError(f"the server did not start: {line!r}")
        self.url = line.split(" at ")[1].split()[0].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])
        return self.url

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)

    def cpu(self) -> float:
        """The server's CPU seconds so far (Linux: /proc; NaN elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(values) -> str:
    return f"p50 {1e3 * np.percentile(values, 50):6.2f} ms, p99 {1e3 * np.percentile(values, 99):6.2f} ms"


def split(total: int, parts: int) -> list:
    return [total // parts + (k < total % parts) for k in range(parts)]


def run_judges(url: str, n: int, dim: int, judges: int, blocks: list, folder: Path, barrier=None) -> list:
    """``judges`` judge processes; block b's tells are shared among them."""
    spawn = multiprocessing.get_context("spawn")
    shares = [split(block, judges) for block in blocks]
    processes = [spawn.Process(target=judge_process, args=(url, n, dim, 100 + k, [s[k] for s in shares],
                                                           str(folder / f"judge{k}"), barrier))
                 for k in range(judges)]
    for p in processes:
        p.start()
    return processes


def collect(folder: Path, judges: int) -> dict:
    parts = [np.load(folder / f"judge{k}.npz") for k in range(judges)]
    return {"ask": np.concatenate([p["ask"] for p in parts]), "tell": np.concatenate([p["tell"] for p in parts]),
            "cpu": sum(float(p["cpu"]) for p in parts)}


def merge(results: list, seconds: float) -> dict:
    return {"ask": np.concatenate([r["ask"] for r in results]), "tell": np.concatenate([r["tell"] for r in results]),
            "seconds": seconds, "cpu": sum(r["cpu"] for r in results)}


def report(name: str, result: dict, say) -> float:
    tells = len(result["tell"])
    rate = tells / result["seconds"]
    say(f"{name:<24} {tells:6d} tells in {result['seconds']:6.1f} s: {rate:6.1f} tells/s; "
        f"tell {percentiles(result['tell'])}; ask {percentiles(result['ask'])}")
    return rate


def throughput(args, folder: Path, say) -> dict:
    n, dim, T = args.items, args.dim, args.tells + 100
    blocks = split(args.tells, args.blocks)
    say(f"n = {n}, d = {dim}, {args.tells} tells a side in {args.blocks} alternating blocks (load "
        f"{os.getloadavg()[0]:.2f})")
    # one judge over HTTP against in-process, block after block
    server = Server(folder / "one.sqlite", n, dim, T)
    url = server.start()
    local, remote, server_cpu = [], [], 0.0
    try:
        with Ranker(folder / "in1.sqlite", n_items=n, dim=dim, T=T, seed=1) as ranker, \
                Client(url, token=TOKEN) as client:
            judges = Judge(n, dim), Judge(n, dim)
            for block in blocks:
                local.append(loop(ranker, judges[0], block))
                before = server.cpu()
                remote.append(loop(client, judges[1], block))
                server_cpu += server.cpu() - before
    finally:
        server.stop()
    inprocess = merge(local, sum(r["end"] - r["start"] for r in local))
    one = merge(remote, sum(r["end"] - r["start"] for r in remote))
    rate_in = report("in-process", inprocess, say)
    report("one judge over HTTP", one, say)
    # the judges over HTTP against in-process, block after block
    server = Server(folder / "many.sqlite", n, dim, T)
    url = server.start()
    barrier = multiprocessing.get_context("spawn").Barrier(args.judges + 1)
    local, http_seconds, many_cpu = [], 0.0, 0.0
    try:
        processes = run_judges(url, n, dim, args.judges, blocks, folder, barrier)
        with Ranker(folder / "in2.sqlite", n_items=n, dim=dim, T=T, seed=1) as ranker:
            judge = Judge(n, dim)
            for block in blocks:
                before = server.cpu()
                barrier.wait()
                start = time.monotonic()
                barrier.wait()
                http_seconds += time.monotonic() - start
                many_cpu += server.cpu() - before
                local.append(loop(ranker, judge, block))
        for p in processes:
            p.join()
            if p.exitcode:
                raise RuntimeError(f"a judge failed (exit {p.exitcode})")
    finally:
        server.stop()
    many = {**collect(folder, args.judges), "seconds": http_seconds}
    inprocess_too = merge(local, sum(r["end"] - r["start"] for r in local))
    rate_in_too = report("in-process (again)", inprocess_too, say)
    rate_many = report(f"{args.judges} judges over HTTP", many, say)
    added = np.median(one["tell"]) - np.median(inprocess["tell"])
    capacity = 1 / rate_many - 1 / rate_in_too
    say(f"added per tell (p50, one judge): {1e3 * added:.3f} ms; capacity cost per tell ({args.judges} judges): "
        f"{1e3 * capacity:.3f} ms; {args.judges} judges / in-process throughput: {rate_many / rate_in_too:.2f} "
        f"(load {os.getloadavg()[0]:.2f})")
    per = 1e3 / args.tells  # CPU per ask + tell (ms): what the machine's load changes least
    cpu = {"inprocess_cpu_ms": per * inprocess["cpu"], "one_server_cpu_ms": per * server_cpu,
           "one_judge_cpu_ms": per * one["cpu"], "many_server_cpu_ms": per * many_cpu,
           "many_judges_cpu_ms": per * many["cpu"]}
    say(f"CPU per ask + tell: in-process {cpu['inprocess_cpu_ms']:.3f} ms; one judge: server "
        f"{cpu['one_server_cpu_ms']:.3f} ms + judge {cpu['one_judge_cpu_ms']:.3f} ms; {args.judges} judges: server "
        f"{cpu['many_server_cpu_ms']:.3f} ms + judges {cpu['many_judges_cpu_ms']:.3f} ms")
    return {"inprocess_rate": rate_in, "inprocess_rate_again": rate_in_too, "http_rate": rate_many,
            "added_p50_ms": 1e3 * added, "inprocess_tell_p50_ms": 1e3 * np.median(inprocess["tell"]),
            "http_tell_p50_ms": 1e3 * np.median(one["tell"]), "capacity_ms": 1e3 * capacity, **cpu,
            "load": os.getloadavg()[0]}


def faults(args, folder: Path, say) -> int:
    n, dim = args.items, args.dim
    store = folder / "faults.sqlite"
    server = Server(store, n, dim, T=2 * args.tells + 1000)
    url = server.start()
    rng = np.random.default_rng(args.seed)
    points = np.sort(rng.choice(np.arange(1, args.tells), size=args.kills, replace=False))
    processes = run_judges(url, n, dim, args.judges, [args.tells], folder)
    kills, at = [], []
    with Client(url, retry_for=120.0) as watcher:
        for point in points:
            while watcher.n_told < point and any(p.is_alive() for p in processes):
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.05))  # anywhere in the tells in flight, not just after one
            at.append(watcher.n_told)
            server.kill()
            started = time.monotonic()
            server.start()
            kills.append(time.monotonic() - started)
    for p in processes:
        p.join()
    server.stop()
    failed = [p.exitcode for p in processes if p.exitcode]
    acked = {}
    for k in range(args.judges):
        for line in open(folder / f"judge{k}.acks"):
            ticket, wins = map(int, line.split())
            acked[ticket] = wins
    import sqlite3
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    stored = dict(conn.execute("SELECT ask_id, wins FROM tells"))
    open_tickets = conn.execute("SELECT count(*) FROM asks WHERE status = 'open'").fetchone()[0]
    conn.close()
    lost = sorted(t for t in acked if t not in stored)
    changed = sorted(t for t in acked if t in stored and stored[t] != acked[t])
    unacknowledged = sorted(t for t in stored if t not in acked)
    summary = verify_store(store, replay=True)
    recognised = sum(int(np.load(folder / f"judge{k}.npz")["recorded_on_retry"]) for k in range(args.judges))
    say(f"fault run: {len(kills)} kill -9 under load by {args.judges} judges, at {', '.join(map(str, at))} told "
        f"(restart to serving: {', '.join(f'{s:.1f}' for s in kills)} s); {len(acked)} tells acknowledged, "
        f"{len(stored)} stored ({recognised} of them recognised as recorded when retried): "
        f"{len(lost)} lost, {len(changed)} with another outcome, {len(unacknowledged)} stored but not acknowledged; "
        f"{open_tickets} tickets left open (asks whose answer a kill cut off); verify --replay: ok, "
        f"{summary['counts']['told']} told; judges failed: {len(failed)}")
    return 0 if not (lost or changed or unacknowledged or failed) and len(kills) == args.kills else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--tells", type=int, default=10_000)
    parser.add_argument("--judges", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks of each comparison")
    parser.add_argument("--kills", type=int, default=0, help="the fault run: kill -9 the server this many times")
    parser.add_argument("--seed", type=int, default=0, help="of the kill moments")
    parser.add_argument("--out", type=Path, help="where the stores and the judges' files go (default: a temporary "
                                                 "directory); --out also gets service.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        if args.kills:
            return faults(args, folder, print)
        result = throughput(args, folder, print)
        if args.out:
            (folder / "service.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
