"""How fast is the next battle with 20 judges voting at once?

    python -m benchmarks.judging [--judges 20] [--votes 30] [--prompts 100]

A server (the app ``serve --prompts --responses`` serves, on uvicorn, in a process of its own)
over a pool of ``prompts`` prompts answered by 6 models and a fresh store (policy RB, d = 1); 20
client threads, each a judge named in the store with its own token (``judges.add``), loop ``GET
battle/next`` then ``POST battle/vote`` (a random verdict) ``votes`` times, all at once, pausing ``--think`` seconds on
average before each battle (exponential; a person takes tens of seconds; 0: back to back, where
the ranker's single thread is the queue: every ask and tell is a transaction with its refit).  Reported: the latency of each route
as the client sees it (median, p95, max), beside the in-process ``Ranker.ask`` + ``tell`` on an
identical store (the floor the HTTP route stands on).  The load average is printed: on a shared
machine the numbers are an upper bound.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

MODELS = [f"model-{k}" for k in range(6)]


def write_pool(directory: Path, prompts: int) -> tuple:
    p, r = directory / "prompts.jsonl", directory / "responses.jsonl"
    p.write_text("".join(json.dumps({"question_id": f"q{k}", "prompt": f"Question {k}: explain `x{k}`."}) + "\n"
                         for k in range(prompts)))
    r.write_text("".join(json.dumps({"question_id": f"q{k}", "model": m,
                                     "response": f"**{m}** answers {k}:\n\n```python\nprint({k})\n```"}) + "\n"
                         for k in range(prompts) for m in MODELS))
    return p, r


def serve(directory: str) -> None:
    """The child: the app that ``serve --prompts --responses`` serves, on uvicorn; prints its port."""
    import uvicorn

    from study.online import Ranker
    from study.online.service.pool import read_pool
    from study.online.service.serve import judging_log, listening_socket
    from study.online.service.server import create_app
    directory = Path(directory)
    store = directory / "store.sqlite"
    pool = read_pool(directory / "prompts.jsonl", directory / "responses.jsonl")
    app = create_app(lambda: Ranker(store), token="admin-token-0123456789abcdef", pool=pool,
                     judging_log=judging_log(store))
    sock = listening_socket("127.0.0.1", 0)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


def judge(url, token, votes, seed, timings, errors, think):
    import httpx
    rng = np.random.default_rng(seed)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for _ in range(votes):
            time.sleep(rng.exponential(think) if think > 0 else 0.0)  # reading the two responses
            start = time.perf_counter()
            battle = client.get("/api/v1/battle/next")
            timings["next"].append(time.perf_counter() - start)
            if battle.status_code != 200 or battle.json().get("done"):
                errors.append(battle.text)
                return
            start = time.perf_counter()
            answer = client.post("/api/v1/battle/vote", json={"battle": battle.json()["battle"],
                                                              "choice": ["left", "right", "tie"][rng.integers(3)]})
            timings["vote"].append(time.perf_counter() - start)
            if answer.status_code != 200:
                errors.append(answer.text)


def in_process(directory: Path, asks: int) -> list:
    from study.online import Ranker
    rng = np.random.default_rng(0)
    seconds = []
    with Ranker(directory / "floor.sqlite", items=MODELS, dim=1, T=asks + 10, T0=min(60, asks // 4),
                seed=1) as ranker:
        for _ in range(asks):
            start = time.perf_counter()
            ticket = ranker.ask([1.0])
            ranker.tell(ticket, int(rng.random() < 0.5), 1)
            seconds.append(time.perf_counter() - start)
    return seconds


def stats(values) -> str:
    ms = np.asarray(values) * 1e3
    return (f"median {np.median(ms):6.1f} ms, p95 {np.quantile(ms, 0.95):6.1f} ms, max {ms.max():6.1f} ms "
            f"(n = {len(ms)})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.judging")
    p.add_argument("--judges", type=int, default=20)
    p.add_argument("--votes", type=int, default=30, help="battles per judge")
    p.add_argument("--prompts", type=int, default=100)
    p.add_argument("--think", type=float, default=1.0, help="mean seconds a judge takes before the next battle "
                                                            "(exponential; 0: back to back, the saturated case)")
    p.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # the child
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    import os

    from study.online import Ranker
    from study.online.judges import add as add_judge
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_pool(directory, args.prompts)
        asks = args.judges * args.votes
        with Ranker(directory / "store.sqlite", items=MODELS, dim=1, T=asks + 10, T0=min(60, asks // 4),
                    seed=1) as ranker:
            tokens = [add_judge(ranker, f"judge-{k:02d}") for k in range(args.judges)]
        child = subprocess.Popen([sys.executable, "-m", "benchmarks.judging", "--serve", tmp],
                                 stdout=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{int(child.stdout.readline())}"
            timings, errors = {"next": [], "vote": []}, []
            threads = [threading.Thread(target=judge, args=(url, token, args.votes, k, timings, errors, args.think))
                       for k, token in enumerate(tokens)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
        finally:
            child.terminate()
            child.wait(30)
        floor = in_process(directory, asks)
    print(f"{args.judges} judges x {args.votes} battles at once, {args.prompts} prompts x {len(MODELS)} models; "
          f"think {args.think:g} s; {wall:.1f} s wall, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"GET  battle/next   {stats(timings['next'])}")
    print(f"POST battle/vote   {stats(timings['vote'])}")
    print(f"in-process ask+tell {stats(floor)}")
    if errors:
        print(f"{len(errors)} refused: {errors[:2]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
