"""The ranker as a service, to watch: a server on a fresh store, a simulated judge telling over HTTP,
and the live page.

    python examples/service_demo.py                                    # open http://127.0.0.1:8000/, Ctrl-C stops
    python examples/service_demo.py --screenshot docs/service_page.png # the picture in docs/service.md

The server is ``python -m study.online serve`` in a process of its own (store and token in a
temporary directory); the judge, in this process, asks and tells through ``study.online.Client``
(five models, contexts of length d = 4, Bradley-Terry outcomes with a tie now and then, one
ticket in a hundred left unanswered), some 20 tells a second.  ``--screenshot PATH``: after ``--tells`` outcomes, Debian's chromium (driven by
Playwright) opens the page and saves it to PATH, and the demo stops.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from study.online import Client

NAMES = ["model-a", "model-b", "model-c", "model-d", "model-e"]
SKILL = np.array([[2.0, 0.4, 0.0, 0.0], [1.0, -0.4, 0.3, 0.0], [0.6, 0.0, -0.3, 0.2], [-0.4, 0.2, 0.0, -0.2],
                  [-1.6, 0.0, 0.0, 0.0]])
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def judge(client: Client, rng, tells: int, pause: float) -> None:
    for _ in range(tells):
        ticket = client.ask(np.r_[1.0, rng.normal(0.0, 0.5, 3)])
        if rng.random() < 0.01:  # an annotator who never answers: the ticket stays open
            continue
        x = np.asarray(ticket.x)
        p_other = 1.0 / (1.0 + np.exp(x @ (SKILL[ticket.major] - SKILL[ticket.other])))
        tie = rng.random() < 0.08
        client.tell(ticket, wins=0 if tie else int(rng.random() < p_other), ties=int(tie))
        time.sleep(pause)


def screenshot(url: str, path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url)
        page.wait_for_function("document.querySelector('#diagram img') !== null && "
                               "document.querySelectorAll('#leaderboard tbody tr').length > 0", timeout=60_000)
        page.screenshot(path=str(path), full_page=True)
        browser.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tells", type=int, default=100_000, help="how many the judge tells (default: until Ctrl-C)")
    parser.add_argument("--screenshot", type=Path, help="save the page to this PNG after --tells (default 1,500) and stop")
    args = parser.parse_args(argv)
    tells = 1500 if args.screenshot and args.tells == 100_000 else args.tells
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "demo.sqlite"
        server = subprocess.Popen([sys.executable, "-m", "study.online", "serve", str(store), "--port", str(args.port),
                                   "--items", *NAMES, "--dim", "4", "--T", "5000", "--seed", "3"],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "STUDY_ONLINE_TOKEN": ""})
        try:
            line = server.stdout.readline()
            if " at http://" not in line:
                return 2
            url = line.split(" at ")[1].split()[0]
            print(f"the page: {url}", flush=True)
            with Client(url, token=(Path(folder) / "demo.sqlite.token").read_text()) as client:
                judge(client, np.random.default_rng(0), tells, 0.0 if args.screenshot else 0.05)
            if args.screenshot:
                screenshot(url, args.screenshot)
                print(f"saved {args.screenshot}")
        except KeyboardInterrupt:
            pass
        finally:
            server.terminate()
            server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
