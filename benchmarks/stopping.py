"""The stopping study (not a test): stop at the first look where the top item is separated from the
rest, once with the fixed-time CIs and once with the confidence sequences, and count over
replications how often each rule names the wrong top item and how many comparisons it needed.

    python -m benchmarks.stopping --out DIR/AB --settings A B --reps 400
    python -m benchmarks.stopping --out DIR/llm --settings llm --reps 100

Each replication runs RB (the paper's policy; it never looks at the intervals, so both rules watch
the same run) and keeps the debiased estimate at every look: every 10 steps in Settings A and B
(T = 500, the coverage study's grid; the replications are the coverage study's, seed namespace
"regret"), every 50 steps in the LLM replay (T = 5000, M = 1; seed namespace "llm").  At each look
the rule of :func:`study.core.stopping.separation` (top k = 1, level 0.95: every pair (leader, j)
separated, Bonferroni over the n - 1 pairs) is evaluated at two contexts:

* ``mean``: the mean context (A and B: E x = 1_d, where every item ties in the truth, x'theta*_i = 2
  in A and 1 in B, so that *any* decision is a false separation; the LLM replay: the mean of the
  100 question embeddings, where the truth has a clear leader);
* ``first``: the replication's first context (a random prompt: a strict leader, a random gap);
* ``tie``: a context where the two leaders tie exactly and lead the rest by at least 0.5
  (:func:`tie_context`; A: x = (1.15 x 4, 0.9 x 6), B: (1.4, 1.4, 0.9 x 8), inside the contexts'
  N(1, 0.5) cloud; the LLM replay: the mean question moved, intercept kept at 1, to where GPT-4o mini
  and GPT-3.5 tie, 2.4 Mahalanobis units from the mean question), so that any decision is false.

Rules: ``CI`` (fixed-time CIs, stop at the first separated look), ``CS`` (confidence sequences,
tightest at T x M, stop at the first separated look) and ``CI@T`` (fixed-time CIs at the last
look only: the one look the CI is valid for, the reference).  Written to DIR: ``stopping.csv``
(one row per replication, context and rule) and ``stopping.md`` (the table of docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT_SEED = 20250101
LEVEL = 0.95
SETTINGS = ("A", "B", "llm")
RULES = ("CI", "CS", "CI@T")


def tie_context(truth, x0, free=None, margin: float = 0.5):
    """A context near ``x0`` at which the two leaders at ``x0`` (by the truth; ties by index) tie
    exactly and lead every other item by ``margin``: x0 projected, along its ``free`` coordinates
    (default all), onto the hyperplane x'(theta*_a - theta*_b) = 0, then moved (within it) towards
    the leaders until the margin holds."""
    free = np.arange(len(x0)) if free is None else np.asarray(free)
    order = np.argsort(-(truth @ x0), kind="stable")
    a, b = order[0], order[1]
    others = order[2:]
    delta = truth[a] - truth[b]

    def onto_tie(v):  # the free coordinates moved so that v'delta = 0
        v = v.copy()
        v[free] -= (v @ delta) / (delta[free] @ delta[free]) * delta[free]
        return v

    x = onto_tie(np.asarray(x0, dtype=float))
    lift = np.zeros_like(x)
    lift[free] = ((truth[a] + truth[b]) / 2 - truth[others].mean(axis=0))[free]
    lift[free] -= (lift[free] @ delta[free]) / (delta[free] @ delta[free]) * delta[free]
    lead = lambda v: min(truth[a] @ v, truth[b] @ v) - (truth[others] @ v).max()
    step = 0.0
    while lead(x + step * lift) < margin:
        step += 0.01
    return x + step * lift


def _environment(name: str, rep: int):
    """(setting, environment, looks, mean context, seed) of replication ``rep``."""
    from study.simulation.environment import BTLEnvironment
    from study.simulation.seeds import replication_seed, seed_sequence
    from study.simulation.settings import SETTINGS as BUILTIN

    if name == "llm":
        from study.llm.data import load_contexts
        from study.llm.runs import Replay, llm_setting

        setting = llm_setting()
        seed = replication_seed(ROOT_SEED, "llm", "llm", rep)
        env = Replay("llm").environment(setting, seed)
        return setting, env, range(50, setting.T + 1, 50), load_contexts()[1].mean(axis=0), seed, range(1, setting.dim)
    setting = BUILTIN[name]
    seed = replication_seed(ROOT_SEED, "regret", name, rep)
    env = BTLEnvironment(setting, seed_sequence(seed))
    return setting, env, range(10, setting.T + 1, 10), np.full(setting.dim, setting.context_mean), seed, None


def run_one(task) -> list:
    """The records of one replication: one per context and rule."""
    from study.core.stopping import first_separation, separation
    from study.simulation.replication import run_environment

    name, rep = task
    setting, env, looks, mean_context, seed, free = _environment(name, rep)
    result = run_environment(env, "RB", setting, snapshot_times=looks, seed=seed)
    snapshots = [(t, result.snapshots[t][1]) for t in sorted(result.snapshots)]
    truth = env.theta_star - env.theta_star.mean(axis=0)
    tightest = setting.T * setting.M
    records = []
    for target, x in (("mean", mean_context), ("first", env.contexts[0]),
                      ("tie", tie_context(truth, mean_context, free))):
        score = truth @ x
        ranked = np.sort(score)[::-1]
        gap = float(ranked[0] - ranked[1])
        tie = gap < 1e-9 * max(1.0, abs(float(ranked[0])))
        best = int(np.argmax(score))
        for rule in RULES:
            if rule == "CI@T":
                verdict = separation(snapshots[-1][1], x, level=LEVEL, anytime=False)
                t = snapshots[-1][0] if verdict.decided else None
            else:
                t, verdict = first_separation(snapshots, x, level=LEVEL, anytime=rule == "CS", tightest_at=tightest)
            named = verdict.top[0] if (t is not None and verdict.top) else -1
            records.append({"setting": name, "rep": rep, "seed": seed, "target": target, "rule": rule, "gap": gap,
                            "tie": tie, "best": best, "decided": t is not None, "t": t if t is not None else np.nan,
                            "comparisons": (t * setting.M) if t is not None else np.nan, "named": named,
                            "wrong": t is not None and (tie or named != best), "T": setting.T, "M": setting.M})
    return records


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, context, rule): replications, decided and wrong fractions with binomial SEs,
    and the comparisons needed (median and quartiles over the decided replications; the mean with
    undecided ones counted at T x M)."""
    rows = []
    for (setting, target, rule), g in frame.groupby(["setting", "target", "rule"], sort=False):
        reps = len(g)
        decided, wrong = g["decided"].mean(), g["wrong"].mean()
        used = g["comparisons"].fillna(g["T"] * g["M"])
        done = g.loc[g["decided"], "comparisons"]
        rows.append({"setting": setting, "context": target, "rule": rule, "reps": reps, "tied": bool(g["tie"].all()),
                     "decided": decided, "decided_se": np.sqrt(decided * (1 - decided) / reps),
                     "wrong": wrong, "wrong_se": np.sqrt(wrong * (1 - wrong) / reps),
                     "median": done.median() if len(done) else np.nan,
                     "q1": done.quantile(0.25) if len(done) else np.nan,
                     "q3": done.quantile(0.75) if len(done) else np.nan, "mean_used": used.mean()})
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame) -> str:
    lines = ["| setting | context | rule | reps | decided | wrong top item | comparisons to decide: median [IQR] | "
             "mean comparisons (undecided at T x M) |", "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        context = r.context + ((" (all tied)" if r.context == "mean" else " (two leaders tied)") if r.tied else "")
        median = "--" if np.isnan(r.median) else f"{r.median:,.0f} [{r.q1:,.0f}, {r.q3:,.0f}]"
        lines.append(f"| {r.setting} | {context} | {r.rule} | {r.reps} | {r.decided:.3f} ± {r.decided_se:.3f} | "
                     f"{r.wrong:.3f} ± {r.wrong_se:.3f} | {median} | {r.mean_used:,.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for stopping.csv and stopping.md")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--table-only", action="store_true", help="rewrite stopping.md from DIR/stopping.csv")
    args = parser.parse_args(argv)
    if args.table_only:
        text = to_markdown(summarise(pd.read_csv(args.out / "stopping.csv")))
        (args.out / "stopping.md").write_text(text)
        print(text)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [(name, rep) for name in args.settings for rep in range(args.reps)]
    started = time.perf_counter()
    records = []
    with cf.ProcessPoolExecutor(max_workers=args.workers) as pool:
        for k, rows in enumerate(pool.map(run_one, tasks, chunksize=1), start=1):
            records += rows
            if k % 20 == 0 or k == len(tasks):
                print(f"{k}/{len(tasks)} replications, {time.perf_counter() - started:.0f} s", flush=True)
    frame = pd.DataFrame(records)
    frame.to_csv(args.out / "stopping.csv", index=False)
    text = to_markdown(summarise(frame))
    (args.out / "stopping.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
