"""The paper's ordering under the three graph protocols: the regret study (Settings A and B, the five
paper methods, 200 replications) run with ``graph=connected``, ``no_isolated`` and ``raw``, on the
same seeds, so that every difference is paired -- between methods within a protocol, and between
protocols for a method (the three protocols read the same graph draws: docs/sensitivity.md).

    for g in connected no_isolated raw; do
        python jobs/regret.py --set graph=$g --set ci_every=100 --out DIR/$g
    done
    python -m benchmarks.graph_protocols DIR          # the tables of docs/sensitivity.md

``ci_every=100`` records the debiased CIs at t = 100, ..., 500 (never changing a choice), for CP at T
where the graph is connected.  6,000 replications; about 7 minutes per protocol on 2 busy cores.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

import study
from study.results import compare
from study.results.verdicts import _se

PROTOCOLS = ("connected", "no_isolated", "raw")
STUDY = "regret"


def _pm(mean, se, digits=3) -> str:
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def _signed(mean, se, digits=3) -> str:
    text = f"{mean:+.{digits}f} ± {se:.{digits}f}".replace("-", "−")
    return f"**{text}**" if abs(mean) > compare.Z * se else text


def stage_regret(out) -> pd.DataFrame:
    """Per replication: the mean regret per step over t <= T0 (``stage1``) and over T0 < t <= T
    (``stage2``), from R(T0) and R(T)."""
    at = study.load(out, STUDY, columns=["T0", "T", "avg_regret"],
                    filter=(ds.field("t") == ds.field("T0")) | (ds.field("t") == ds.field("T")))
    at["at"] = np.where(at["t"] == at["T"], "R_T", "R_T0")
    wide = at.pivot_table(index=["setting", "method", "rep", "T0", "T"], columns="at", values="avg_regret",
                          observed=True).reset_index()
    wide["stage1"] = wide["R_T0"]
    wide["stage2"] = (wide["T"] * wide["R_T"] - wide["T0"] * wide["R_T0"]) / (wide["T"] - wide["T0"])
    return wide[["setting", "method", "rep", "stage1", "stage2"]]


def tables(root: Path) -> str:
    values = {g: compare.final_values(root / g, STUDY) for g in PROTOCOLS}
    within = {g: compare.differences(v) for g, v in values.items()}
    connected_graphs = {g: v[v["method"] == "RB"].groupby("setting")["cp"].apply(lambda c: int(c.notna().sum()))
                        for g, v in values.items()}
    lines = ["R(T), mean ± SE over 200 replications, and method − RB, paired (bold: beyond 3 paired SEs).", "",
             "| setting | method | " + " | ".join(f"R(T) {g}" for g in PROTOCOLS) + " | "
             + " | ".join(f"− RB, {g}" for g in PROTOCOLS) + " |", "|" + "---|" * (2 + 2 * len(PROTOCOLS))]
    methods = [m for m in study.METHODS if m in set(values["connected"]["method"])]
    for setting in sorted(set(values["connected"]["setting"])):
        for method in methods:
            cells = [setting, method]
            for g in PROTOCOLS:
                v = values[g]
                r = v[(v["setting"] == setting) & (v["method"] == method)]["avg_regret"]
                cells.append(_pm(r.mean(), _se(r)))
            for g in PROTOCOLS:
                d = within[g]
                row = d[(d["setting"] == setting) & (d["method"] == method) & (d["metric"] == "avg_regret")]
                cells.append("—" if not len(row) else _signed(row["diff"].iloc[0], row["diff_se"].iloc[0]))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "The protocol's effect, each method paired with itself under the connected protocol "
              "(protocol − connected); replications with a connected graph (CIs at T) of 200:", "",
              "| setting | method | Δ R(T), no_isolated | Δ R(T), raw | Δ error, no_isolated | Δ error, raw | "
              "connected graphs: no_isolated / raw |", "|---|---|---|---|---|---|---|"]
    effects = {g: compare.across(values[g], values["connected"]) for g in PROTOCOLS[1:]}
    for setting in sorted(set(values["connected"]["setting"])):
        for method in methods:
            cells = [setting, method]
            for metric in ("avg_regret", "rel_error"):
                for g in PROTOCOLS[1:]:
                    e = effects[g]
                    row = e[(e["setting"] == setting) & (e["method"] == method) & (e["metric"] == metric)].iloc[0]
                    cells.append(_signed(row["diff"], row["diff_se"]))
            cells.append(" / ".join(str(connected_graphs[g].get(setting, 0)) for g in PROTOCOLS[1:]))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Where the regret is paid: mean regret per step over t ≤ T0 and over T0 < t ≤ T, and ETA − RB "
              "there, paired:", "", "| setting | protocol | RB: t ≤ T0 / t > T0 | ETA: t ≤ T0 / t > T0 | "
              "ETA − RB, t ≤ T0 | ETA − RB, t > T0 |", "|---|---|---|---|---|---|"]
    for setting in sorted(set(values["connected"]["setting"])):
        for g in PROTOCOLS:
            s = stage_regret(root / g)
            s = s[s["setting"] == setting]
            rb, eta = (s[s["method"] == m].set_index("rep") for m in ("RB", "ETA"))
            cells = [setting, g, f"{rb['stage1'].mean():.3f} / {rb['stage2'].mean():.3f}",
                     f"{eta['stage1'].mean():.3f} / {eta['stage2'].mean():.3f}"]
            for stage in ("stage1", "stage2"):
                d = (eta[stage] - rb[stage]).dropna()
                cells.append(_signed(d.mean(), _se(d)))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the directory holding connected/, no_isolated/ and raw/ (each a --out)")
    args = parser.parse_args(argv)
    print(tables(Path(args.root)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
