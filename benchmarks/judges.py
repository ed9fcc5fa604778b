"""The judge report on simulated panels: does it flag the planted judges and no honest one?

    python -m benchmarks.judges [--runs 200] [--votes 300]

A panel: 20 judges, 8 models with Bradley-Terry scores drawn N(0, 1) per run, each judge casting
``votes`` votes on uniformly drawn pairs of 200 questions (sides drawn at random, 10% of battles
re-served to a second judge), ties 10% and both-bad 5% of the time.  Judges 0 and 1 have a planted
left-side bias of +0.2 (with probability 0.4 they vote left whatever they see, otherwise honestly:
the share of left wins is 0.7 where an honest judge's is 0.5); judge 2 votes at random (left or
right with probability 1/2, ties as the others).  Reported: the share of runs in which the report
flags exactly the three, the share in which it flags an honest judge (the false-alarm rate of the
Holm-adjusted tests; also on all-honest panels) and the power per planted judge.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from scipy.special import expit

JUDGES, MODELS, QUESTIONS = 20, 8, 200
BIASED, RANDOM = (0, 1), (2,)


def simulate_panel(seed, *, votes: int = 300, judges: int = JUDGES, models: int = MODELS, biased=BIASED,
                   random=RANDOM, bias: float = 0.2, overlap: float = 0.1, tie: float = 0.10,
                   bothbad: float = 0.05) -> pd.DataFrame:
    """A battle log of a simulated panel (module docstring): model_a, model_b, winner, judge, left,
    seconds, question_id."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 1.0, models)
    names = [f"model-{k}" for k in range(models)]
    rows = []
    for g in range(judges):
        for _ in range(votes):
            q = int(rng.integers(QUESTIONS))
            a, b = rng.choice(models, 2, replace=False)
            rows.append((q, a, b, g))
            if rng.random() < overlap:  # the same battle to a second judge
                rows.append((q, a, b, int((g + 1 + rng.integers(judges - 1)) % judges)))
    q, a, b, g = (np.array(c) for c in zip(*rows))
    n = len(q)
    b_left = rng.random(n) < 0.5
    p_left = expit(np.where(b_left, skill[b] - skill[a], skill[a] - skill[b]))
    p_left = np.where(np.isin(g, random), 0.5, p_left)
    forced = np.isin(g, biased) & (rng.random(n) < 2 * bias)  # 0.4 x 1 + 0.6 x 0.5 = 0.5 + bias
    left_won = forced | (rng.random(n) < p_left)
    u = rng.random(n)
    a_won = left_won != b_left
    winner = np.where(u < tie, "tie", np.where(u < tie + bothbad, "tie (bothbad)",
                                               np.where(a_won, "model_a", "model_b")))
    names = np.array(names)
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                         "judge": [f"judge-{k:02d}" for k in g], "left": np.where(b_left, names[b], names[a]),
                         "seconds": rng.gamma(4.0, 5.0, n), "question_id": [f"q{k}" for k in q]})


def run(runs: int, votes: int, honest_only: bool = False, draws: int = 50) -> dict:
    from study.leaderboard.judges import judge_report
    planted = set() if honest_only else {f"judge-{k:02d}" for k in BIASED + RANDOM}
    exact = false_alarm = 0
    found = {name: 0 for name in planted}
    for seed in range(runs):
        frame = simulate_panel(seed, votes=votes, biased=() if honest_only else BIASED,
                               random=() if honest_only else RANDOM)
        flagged = set(judge_report(frame, draws=draws, seed=seed).flagged)
        exact += flagged == planted
        false_alarm += bool(flagged - planted)
        for name in planted & flagged:
            found[name] += 1
    return {"runs": runs, "exact": exact / runs, "false_alarm": false_alarm / runs,
            "power": {k: v / runs for k, v in sorted(found.items())}}


def _se(share, runs):
    return (share * (1 - share) / runs) ** 0.5


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.judges")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--votes", type=int, default=300, help="votes per judge")
    args = p.parse_args(argv)
    planted = run(args.runs, args.votes)
    honest = run(args.runs, args.votes, honest_only=True)
    print(f"{args.runs} seeded panels of {JUDGES} judges x {args.votes} votes (seeds 0..{args.runs - 1})")
    print(f"planted panel: exactly the 3 flagged in {planted['exact']:.3f} "
          f"(SE {_se(planted['exact'], args.runs):.3f}); "
          f"an honest judge flagged in {planted['false_alarm']:.3f}; power per planted judge {planted['power']}")
    print(f"honest panel: any judge flagged in {honest['false_alarm']:.3f} "
          f"(SE {_se(honest['false_alarm'], args.runs):.3f}; Holm's bound 0.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
