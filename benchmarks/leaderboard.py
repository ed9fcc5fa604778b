"""Leaderboards at a million votes, against the tools teams use now, in one run (issue 34).

    pip install -e ".[bench]"        # evalica, arena-rank (JAX), scikit-learn, statsmodels
    python -m benchmarks.leaderboard [--rows 1000000] [--models 100] [--data DIR] [--skip-peers]

Cases, each in a fresh process of its own (so that its peak resident memory is its own; the data are
read from files written first, with a fixed seed):

* ``command-parquet`` / ``command-jsonl``: ``python -m study.leaderboard FILE --out DIR --quiet``
  on a 1,000,000-row LMArena battle log (100 models, both kinds of tie, a ``judge`` column with a
  few power voters; so the default covariance is judge-clustered), Parquet and the same rows as
  JSON Lines: the whole command, table and figures, timed from outside (wall clock);
* non-contextual, the same 1,000,000 votes (d = 1), fit + sandwich:
  ``study-core``: ``study.fit_btl`` + ``study.debias(se="sandwich")`` on the raw vote arrays (they
  aggregate the identical rows themselves); ``study-leaderboard``: the same from the DataFrame of
  names (coding included); ``evalica``: ``evalica.bradley_terry`` (its fit alone, Rust MM solver,
  from the name columns); ``arena-rank``: ``PairDataset.from_pandas`` + ``BradleyTerry.fit`` +
  ``compute_ratings_and_cis(ci_method="sandwich")`` (JAX, L-BFGS; its first call compiles, as a
  user's does);
* contextual, 1,000,000 single comparisons of 20 models, d = 10, every context distinct, no ties,
  the unpenalised MLE (the same penalty: none): ``study-contextual``: ``fit_btl`` (Newton over the
  arrays) + ``debias(se="sandwich")``; ``sklearn``: ``LogisticRegression(C=inf,
  solver="newton-cholesky", tol=1e-10)`` on the same design in reference coding (item 0's
  columns dropped: (e_j - e_i) (x) x, 190 sparse columns); ``statsmodels``: its logistic regression
  ``Logit(...).fit(method="newton", tol=1e-12)`` on the same design, dense (the binomial GLM with the
  logit link; ``--statsmodels glm`` runs ``GLM(Binomial).fit(method="newton")`` instead, measured at
  100,000 rows 2.5x Logit's CPU and 5x its memory: 14 GB at a million rows, which a shared machine
  cannot give).  Their estimates must equal ours (theta_i - theta_0) to 1e-6.

Printed: wall and CPU seconds, peak resident memory of the step (the process's peak reset just
before it, Linux's ``clear_refs``) and its increase over the memory before the step (data loaded),
the ratios that issue 34's Done-when names, and the largest estimate differences.
Numbers depend on the machine and its load: compare the ratios of one run (docs/leaderboard.md).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = ("command-parquet", "command-jsonl", "study-core", "study-leaderboard", "evalica", "arena-rank",
         "study-contextual", "sklearn", "statsmodels")
PEERS = ("evalica", "arena-rank", "sklearn", "statsmodels")
CONTEXTUAL = dict(n=20, d=10)


# --- data ------------------------------------------------------------------------------------------

def make_votes(rows: int, models: int, seed: int = 0):
    """An LMArena battle log: a DataFrame of model_a, model_b, winner, judge."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    names = np.array([f"model-{k:03d}" for k in range(models)])
    strength = rng.normal(0, 1, models)
    a = rng.integers(0, models, rows)
    b = (a + 1 + rng.integers(0, models - 1, rows)) % models
    p = 1 / (1 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(rows)
    winner = np.where(u < 0.12, "tie", np.where(u < 0.18, "tie (bothbad)",
                                                 np.where(rng.random(rows) < p, "model_a", "model_b")))
    judges = np.minimum(rng.zipf(1.6, rows) - 1, 49_999)  # a few power voters, many occasional ones
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                         "judge": np.char.add("user-", judges.astype(str))})


def make_contextual(rows: int, n: int, d: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.4, (n, d))
    theta -= theta.mean(axis=0)
    i = rng.integers(0, n, rows)
    j = (i + 1 + rng.integers(0, n - 1, rows)) % n
    X = np.column_stack([np.ones(rows), rng.normal(0, 1, (rows, d - 1))])
    p = 1 / (1 + np.exp(-np.einsum("kd,kd->k", X, theta[j] - theta[i])))
    return i, j, X, (rng.random(rows) < p).astype(float)


def write_data(folder: Path, rows: int, models: int) -> None:
    frame = make_votes(rows, models)
    frame.to_parquet(folder / "votes.parquet", index=False)
    frame.to_json(folder / "votes.jsonl", orient="records", lines=True)
    i, j, X, wins = make_contextual(rows, **CONTEXTUAL)
    np.savez(folder / "contextual.npz", i=i, j=j, X=X, wins=wins)


# --- one case, in a child process --------------------------------------------------------------------

def _status_mb(field: str) -> float:
    """VmRSS (resident now) or VmHWM (its peak) of this process, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reset_peak() -> None:
    """Reset the peak resident set to the current one (Linux >= 4.0), so that the step's peak is its own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _votes_arrays(frame):
    import pandas as pd

    codes, names = pd.factorize(pd.concat([frame.model_a, frame.model_b]), sort=True)
    k = len(frame)
    winner = frame.winner.to_numpy()
    return codes[:k], codes[k:], (winner == "model_b").astype(float), np.char.startswith(
        winner.astype(str), "tie").astype(float), list(names)


def reduced_design(i, j, X, n):
    """(e_j - e_i) (x) x without item 0's columns (reference coding), sparse CSR, (K, (n-1) d)."""
    from scipy import sparse

    K, d = X.shape
    rows = np.repeat(np.arange(K), 2 * d)
    cols = np.concatenate([j[:, None] * d + np.arange(d), i[:, None] * d + np.arange(d)], axis=1).ravel()
    vals = np.concatenate([X, -X], axis=1).ravel()
    full = sparse.csr_matrix((vals, (rows, cols)), shape=(K, n * d))
    return full[:, d:]


def run_case(case: str, data: Path) -> dict:
    """What one case measures (module docstring): {seconds, cpu, rss_before, rss_peak, ...}."""
    import pandas as pd

    out: dict = {"case": case}
    if case.startswith("command-"):
        path = data / ("votes.parquet" if case == "command-parquet" else "votes.jsonl")
        target = Path(tempfile.mkdtemp(prefix="leaderboard-bench-"))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "study.leaderboard", str(path), "--out", str(target), "--quiet"],
                              capture_output=True, text=True)
        out["seconds"] = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.update(cpu=usage.ru_utime + usage.ru_stime, rss_before=0.0, rss_peak=usage.ru_maxrss / 1024.0,
                   status=done.returncode, written=sorted(p.name for p in target.iterdir()), error=done.stderr[-300:])
        return out
    if case in ("study-core", "study-leaderboard", "evalica", "arena-rank"):
        frame = pd.read_parquet(data / "votes.parquet")
    else:
        arrays = np.load(data / "contextual.npz")
        i, j, X, wins = arrays["i"], arrays["j"], arrays["X"], arrays["wins"]
        n = CONTEXTUAL["n"]
    # the libraries are imported before the clock starts (their import is not the fit's cost)
    if case.startswith("study"):  # (the core's batch path runs BLAS on one thread by itself)
        import study
        from study.leaderboard import leaderboard
    elif case == "evalica":
        import evalica
    elif case == "arena-rank":
        from arena_rank.models.bradley_terry import BradleyTerry
        from arena_rank.utils.data_utils import PairDataset
    elif case == "sklearn":
        from sklearn.linear_model import LogisticRegression
    elif case == "statsmodels":
        import statsmodels.api as sm
    _reset_peak()
    out["rss_before"] = _status_mb("VmRSS")
    cpu, started = time.process_time(), time.perf_counter()
    if case == "study-core":
        a, b, w, t, names = _votes_arrays(frame)
        cpu, started = time.process_time(), time.perf_counter()  # from the vote arrays, as evalica from its columns
        theta = study.fit_btl(a, b, np.ones((len(a), 1)), w, 1, n_items=len(names), ties=t)
        out["fit_seconds"] = time.perf_counter() - started
        se = study.debias(theta, a, b, np.ones((len(a), 1)), w, 1, ties=t, se="sandwich").se
        out["scores"] = dict(zip(names, theta[:, 0]))
        out["se"] = dict(zip(names, se[:, 0]))
    elif case == "study-leaderboard":
        board = leaderboard(frame[["model_a", "model_b", "winner"]], se="sandwich")
        out["scores"] = dict(zip(board.models, board.theta[:, 0]))
    elif case == "evalica":
        winners = frame.winner.map({"model_a": evalica.Winner.X, "model_b": evalica.Winner.Y,
                                    "tie": evalica.Winner.Draw, "tie (bothbad)": evalica.Winner.Draw})
        result = evalica.bradley_terry(frame.model_a, frame.model_b, winners, tie_weight=0.5)
        logs = np.log(result.scores)
        out["scores"] = dict(logs - logs.mean())
        out["iterations"] = int(result.iterations)
    elif case == "arena-rank":
        dataset = PairDataset.from_pandas(frame)
        model = BradleyTerry(n_competitors=len(dataset.competitors))
        model.fit(dataset)
        out["fit_seconds"] = time.perf_counter() - started
        result = model.compute_ratings_and_cis(dataset, ci_method="sandwich")
        ratings = (np.asarray(result["ratings"]) - model.init_rating) / model.alpha  # back to the logit scale
        out["scores"] = dict(zip(result["competitors"], ratings - ratings.mean()))
    elif case == "study-contextual":
        theta = study.fit_btl(i, j, X, wins, 1, n_items=n)
        out["fit_seconds"] = time.perf_counter() - started
        study.debias(theta, i, j, X, wins, 1, se="sandwich").se
        out["coef"] = (theta[1:] - theta[0]).ravel().tolist()
    elif case == "sklearn":
        design = reduced_design(i, j, X, n)
        cpu, started = time.process_time(), time.perf_counter()  # the fit alone, on its design
        model = LogisticRegression(C=np.inf, solver="newton-cholesky", fit_intercept=False, tol=1e-10,
                                   max_iter=100).fit(design, wins)
        out["coef"] = model.coef_.ravel().tolist()
    elif case == "statsmodels":
        design = reduced_design(i, j, X, n).toarray()
        cpu, started = time.process_time(), time.perf_counter()  # the fit alone, on its design
        if os.environ.get("BENCH_STATSMODELS") == "glm":
            fitted = sm.GLM(wins, design, family=sm.families.Binomial()).fit(method="newton", tol=1e-12, maxiter=50)
        else:
            fitted = sm.Logit(wins, design).fit(method="newton", tol=1e-12, maxiter=50, disp=0)
        out["coef"] = np.asarray(fitted.params).tolist()
    else:
        raise SystemExit(f"unknown case {case!r}")
    out["seconds"] = time.perf_counter() - started
    out["cpu"] = time.process_time() - cpu
    out["rss_peak"] = _status_mb("VmHWM")
    return out


def child(case: str, data: Path, timeout: float) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.leaderboard", "--child", case, "--data", str(data)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    if done.returncode != 0:
        return {"case": case, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _largest_difference(a: dict, b: dict) -> float:
    keys = sorted(set(a) & set(b))
    return float(np.max(np.abs(np.array([a[k] for k in keys]) - np.array([b[k] for k in keys]))))


def report(results: dict) -> str:
    lines = [f"{'case':<20}{'wall s':>9}{'CPU s':>9}{'fit s':>8}{'peak MB':>10}{'+MB':>8}"]
    for case, r in results.items():
        if "error" in r and "seconds" not in r:
            lines.append(f"{case:<20}  failed: {r['error']}")
            continue
        fit = f"{r['fit_seconds']:8.2f}" if "fit_seconds" in r else " " * 8
        lines.append(f"{case:<20}{r['seconds']:9.2f}{r['cpu']:9.2f}{fit}{r['rss_peak']:10.0f}"
                     f"{r['rss_peak'] - r['rss_before']:8.0f}")
    get = lambda case: results.get(case, {}).get("seconds")  # noqa: E731
    lines.append("")
    if get("command-parquet"):
        lines.append(f"the command, 1M-row Parquet: {get('command-parquet'):.2f} s wall (target <= 5 s on 2 idle cores)")
    if get("command-jsonl") and get("command-parquet"):
        lines.append(f"JSON Lines / Parquet: {get('command-jsonl') / get('command-parquet'):.2f}x (target <= 3x)")
    if get("study-core") and get("evalica"):
        lines.append(f"evalica's fit / study's fit + sandwich: {get('evalica') / get('study-core'):.2f}x (target > 1)")
    if get("study-core") and get("arena-rank"):
        lines.append(f"arena-rank's fit + sandwich / study's: {get('arena-rank') / get('study-core'):.1f}x (target >= 4)")
    for peer in ("sklearn", "statsmodels"):
        if get("study-contextual") and get(peer):
            difference = np.max(np.abs(np.subtract(results[peer]["coef"], results["study-contextual"]["coef"])))
            lines.append(f"contextual: {peer}'s fit / study's fit + sandwich: "
                         f"{get(peer) / get('study-contextual'):.1f}x (target > 1); estimates differ by at most "
                         f"{difference:.1e} (target <= 1e-6)")
    for peer in ("study-leaderboard", "evalica", "arena-rank"):
        if "scores" in results.get(peer, {}) and "scores" in results.get("study-core", {}):
            lines.append(f"scores of {peer} vs study's: largest difference "
                         f"{_largest_difference(results[peer]['scores'], results['study-core']['scores']):.1e} (logit)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--models", type=int, default=100)
    p.add_argument("--data", default=None, help="folder for the generated data (default: a temporary one)")
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    p.add_argument("--skip-peers", action="store_true", help="only study's cases")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per case")
    p.add_argument("--statsmodels", choices=("logit", "glm"), default="logit", help="statsmodels' estimator")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(run_case(args.child, Path(args.data)), default=float))
        return 0
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="leaderboard-data-"))
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "votes.parquet").exists():
        print(f"writing {args.rows:,} votes and {args.rows:,} contextual comparisons to {data} ...", flush=True)
        write_data(data, args.rows, args.models)
    cases = [c for c in args.cases if not (args.skip_peers and c in PEERS)]
    os.environ["BENCH_STATSMODELS"] = args.statsmodels
    load = os.getloadavg()
    results = {}
    for case in cases:
        results[case] = child(case, data, args.timeout)
        print(f"  {case}: {results[case].get('seconds', float('nan')):.2f} s", flush=True)
    print(f"\nload average before the run: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
