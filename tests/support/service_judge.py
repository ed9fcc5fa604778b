"""A judge in a process of its own, telling over HTTP (tests/online/test_service_browser.py):

    python service_judge.py URL TOKEN N SEED     N asks and tells through study.online.Client
"""
import sys

import numpy as np

from study.online import Client


def main(url: str, token: str, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with Client(url, token=token) as ranker:
        skill = np.linspace(3.0, -3.0, len(ranker.config["items"]))
        for _ in range(n):
            ticket = ranker.ask(np.r_[1.0, rng.normal(0, 0.3, ranker.config["dim"] - 1)])
            p_other = 1.0 / (1.0 + np.exp(skill[ticket.major] - skill[ticket.other]))
            ranker.tell(ticket, wins=int(rng.random() < p_other))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
