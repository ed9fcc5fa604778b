"""Does N_t Phi_t settle along a study's runs?  The evidence for the confidence sequences' assumption.

The confidence sequences of ``study/core/confseq.py`` are the i.i.d.-form asymptotic CS of
Waudby-Smith et al. (2024) with the comparison count N_t as the clock and the plug-in variance
sigma_t^2 = N_t se_t^2 of each coordinate (docs/core.md, "Confidence sequences").  For the debiased
estimator on adaptively collected data this needs a *stable design*: N_t Phi_t (Phi the debiased
estimator's covariance, Phi_11) settling to a fixed limit along a run.  Its diagonal is what every
coordinate's sequence uses, and it is stored with the intervals (``se`` at every grid time), so this
reads a stored study and reports, per setting, how N_t (Phi_11)_kk = t M se_t^2 moves along each
replication: its ratio to the value at T, at fractions of the horizon, over replications and
coordinates (median, quartiles, the share within 20% of the value at T), and the drift from T/2 to T.

    python jobs/coverage.py --settings A B --reps 100 --out DIR
    python jobs/coverage.py --settings L --set n_items=10 --set T=5000 --set ci_every=100 --reps 30 --out DIR_L
    python -m benchmarks.design_stability DIR [DIR_L ...] [--study coverage] [--method RB]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

import study

FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)


def plug_in_variance(out, name: str = "coverage", method: str = "RB") -> pd.DataFrame:
    """One row per (setting, rep, item, dim, t) of the stored intervals of ``method``: ``t/T`` and
    ``v`` = N_t (Phi_11)_kk = t M se_t^2, and ``ratio`` = v / v at T (rows of replications whose
    intervals exist at T)."""
    ints = study.load(out, name, "intervals", columns=["se"], filter=ds.field("method") == method)
    horizon = study.load(out, name, columns=["T"], filter=(ds.field("t") == ds.field("T")) & (ds.field("method") == method))
    ints = ints.merge(horizon[["setting", "M", "rep", "T"]], on=["setting", "M", "rep"])
    ints["v"] = ints["t"] * ints["M"] * ints["se"] ** 2
    at_T = ints[ints["t"] == ints["T"]][["setting", "rep", "item", "dim", "v"]].rename(columns={"v": "v_T"})
    ints = ints.merge(at_T, on=["setting", "rep", "item", "dim"])
    ints["fraction"] = ints["t"] / ints["T"]
    ints["ratio"] = ints["v"] / ints["v_T"]
    return ints


def stability(ints: pd.DataFrame, fractions=FRACTIONS) -> pd.DataFrame:
    """Per setting and fraction of the horizon (the nearest grid time at or after it): the
    quartiles of v_t / v_T over replications and coordinates, and the share within 20% of 1."""
    rows = []
    for setting, sub in ints.groupby("setting", observed=True):
        grid = np.sort(sub["fraction"].unique())
        for f in fractions:
            at = grid[grid >= f - 1e-9]
            if not len(at):
                continue
            r = sub.loc[sub["fraction"] == at[0], "ratio"]
            q1, med, q3 = np.quantile(r, [0.25, 0.5, 0.75])
            rows.append({"setting": setting, "fraction": f, "t": int(sub.loc[sub["fraction"] == at[0], "t"].iloc[0]),
                         "reps": sub["rep"].nunique(), "coordinates": len(r), "q1": q1, "median": med, "q3": q3,
                         "within_20pct": float(np.mean(np.abs(r - 1) <= 0.2))})
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame) -> str:
    lines = ["| setting | t (t/T) | replications | coordinates | N_t Φ_kk / N_T Φ_kk: median [quartiles] | within 20% |",
             "|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.setting} | {r.t} ({r.fraction:.1f}) | {r.reps} | {r.coordinates} | "
                     f"{r.median:.3f} [{r.q1:.3f}, {r.q3:.3f}] | {r.within_20pct:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="+", help="results directories holding the study")
    parser.add_argument("--study", default="coverage")
    parser.add_argument("--method", default="RB")
    args = parser.parse_args(argv)
    tables = [stability(plug_in_variance(Path(out), args.study, args.method)) for out in args.out]
    print(to_markdown(pd.concat(tables, ignore_index=True)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
