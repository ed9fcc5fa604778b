"""Paired differences of any stored study: each method against a reference method (default RB), and
one results directory against another run of the same seeds (a protocol, a ``--set`` override).

Every method of a study sees the same environments (common random numbers: replication r of a
setting is the same graph, theta(0), contexts and outcome uniforms for every method), so the
difference of two methods is *paired*: the mean over replications of (method - reference) at
t = T, with the standard error of that mean (the SD of the per-replication differences /
sqrt(reps)), over the replications both have.  Two directories whose studies were run with the same
root seed and seed namespace pair the same way, replication by replication (their ``seed`` columns
must agree: a pairing of different environments is refused).

Metrics at t = T: R(T) (``avg_regret``), pair R(T) (``avg_pair_regret``), the relative error
(``rel_error``) and, where intervals were recorded at t = T, CP (the fraction of the replication's
n x d intervals covering the truth; paired over the replications that have intervals at T in both).

The verdict rule is the baselines' (:mod:`.verdicts`): a difference is stated -- ``lower`` or
``higher`` -- only where it exceeds ``z`` paired SEs (default 3); otherwise ``not separated``.

    python -m study.results compare OUT [--reference NAME] [--against OTHER_OUT] [--z 3]
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

from . import storage
from .stored import stored_studies
from .verdicts import Z, _order, _se

METRICS = {"avg_regret": "R(T)", "avg_pair_regret": "pair R(T)", "rel_error": "relative error", "cp": "CP"}
CELL = ["setting", "M"]
KEYS = ["setting", "method", "M", "rep"]
REFERENCE = "RB"


def final_values(out, study) -> pd.DataFrame:
    """One row per replication (setting, method, M, rep, seed): R(T), pair R(T) and the relative error
    at t = T, and ``cp``, the fraction of its intervals at t = T that cover the truth (NaN where it has
    none: no CI grid, or Psi_T singular)."""
    final = storage.load(out, study, columns=["seed", "T", "avg_regret", "avg_pair_regret", "rel_error"],
                         filter=ds.field("t") == ds.field("T"))
    final = final[KEYS + ["seed", "T", "avg_regret", "avg_pair_regret", "rel_error"]]
    if not storage.parts(storage.dataset_dirs(out, study)["intervals"]):
        return final.assign(cp=np.nan).drop(columns="T")
    ints = storage.load(out, study, "intervals", columns=["covered"])
    at_T = ints.merge(final[KEYS + ["T"]], on=KEYS)
    at_T = at_T[at_T["t"] == at_T["T"]]
    cp = at_T.groupby(KEYS, observed=True)["covered"].mean().rename("cp").reset_index()
    return final.merge(cp, on=KEYS, how="left").drop(columns="T")


def _verdict(diff: float, se: float, z: float) -> str:
    if not np.isfinite(diff):
        return ""
    if se == 0:
        return "identical" if diff == 0 else ("lower" if diff < 0 else "higher")
    if not abs(diff) > z * se:
        return "not separated"
    return "lower" if diff < 0 else "higher"


def _row(a: pd.Series, b: pd.Series, z: float) -> dict:
    """The paired difference a - b over the indices both have (non-NaN)."""
    diff = (a - b).dropna()
    if not len(diff):
        return {"diff": np.nan, "diff_se": np.nan, "pairs": 0, "verdict": ""}
    mean, se = float(diff.mean()), _se(diff)
    return {"diff": mean, "diff_se": se, "pairs": int(len(diff)), "verdict": _verdict(mean, se, z)}


def differences(values: pd.DataFrame, reference: str = REFERENCE, z: float = Z) -> pd.DataFrame:
    """One row per (setting, M, method other than ``reference``, metric) of :func:`final_values`: the
    method's mean and SE, the reference's, and the paired difference method - reference with its SE,
    the number of pairs and the verdict.  Cells without the reference method are left out."""
    rows = []
    for (setting, M), cell in values.groupby(CELL, observed=True, sort=True):
        if reference not in set(cell["method"]):
            continue
        ref = cell[cell["method"] == reference].set_index("rep")
        for method in _order(set(cell["method"]) - {reference}):
            own = cell[cell["method"] == method].set_index("rep")
            for metric in METRICS:
                if own[metric].isna().all() and ref[metric].isna().all():
                    continue
                rows.append({"setting": setting, "M": M, "method": method, "reference": reference, "metric": metric,
                             "mean": float(own[metric].mean()), "se": _se(own[metric].dropna()),
                             "reference_mean": float(ref[metric].mean()), "reference_se": _se(ref[metric].dropna()),
                             **_row(own[metric], ref[metric], z)})
    return pd.DataFrame(rows, columns=["setting", "M", "method", "reference", "metric", "mean", "se",
                                       "reference_mean", "reference_se", "diff", "diff_se", "pairs", "verdict"])


def across(values: pd.DataFrame, other: pd.DataFrame, z: float = Z) -> pd.DataFrame:
    """One row per (setting, M, method, metric) stored in both: the mean and SE in ``values`` and in
    ``other`` (each over its own replications) and the paired difference values - other over the
    replications both have.

    Raises
    ------
    ValueError
        A replication both hold was run with different seeds (the runs are not paired: another root
        seed or seed namespace).
    """
    both = values.merge(other, on=KEYS, suffixes=("", "_other"))
    unpaired = both[both["seed"] != both["seed_other"]]
    if len(unpaired):
        r = unpaired.iloc[0]
        raise ValueError(f"the two runs are not paired: replication {r['rep']} of {r['setting']}/{r['method']} has seed "
                         f"{r['seed']} in one and {r['seed_other']} in the other (run both with the same --seed and "
                         "study)")
    rows = []
    for (setting, M, method), sub in both.groupby(["setting", "M", "method"], observed=True, sort=True):
        mine = values[(values["setting"] == setting) & (values["M"] == M) & (values["method"] == method)]
        theirs = other[(other["setting"] == setting) & (other["M"] == M) & (other["method"] == method)]
        sub = sub.set_index("rep")
        for metric in METRICS:
            if mine[metric].isna().all() and theirs[metric].isna().all():
                continue
            rows.append({"setting": setting, "M": M, "method": method, "metric": metric,
                         "mean": float(mine[metric].mean()), "se": _se(mine[metric].dropna()),
                         "reps": int(mine[metric].notna().sum()), "other_mean": float(theirs[metric].mean()),
                         "other_se": _se(theirs[metric].dropna()), "other_reps": int(theirs[metric].notna().sum()),
                         **_row(sub[metric], sub[f"{metric}_other"], z)})
    table = pd.DataFrame(rows, columns=["setting", "M", "method", "metric", "mean", "se", "reps", "other_mean",
                                        "other_se", "other_reps", "diff", "diff_se", "pairs", "verdict"])
    order = {m: i for i, m in enumerate(_order(set(table["method"])))}
    return table.sort_values(["setting", "M", "method"], key=lambda c: c.map(order) if c.name == "method" else c,
                             kind="stable").reset_index(drop=True)


def _pm(mean, se, digits=3) -> str:
    if mean is None or not np.isfinite(mean):
        return "--"
    return f"{mean:.{digits}f}" + ("" if se is None or not np.isfinite(se) else f" ± {se:.{digits}f}")


def _diff_cell(r, digits=3) -> str:
    """"−0.110 ± 0.002 (44.9 SE)", in bold where the verdict rule separates it."""
    if not np.isfinite(r["diff"]):
        return "--"
    text = f"{r['diff']:+.{digits}f}".replace("-", "−")
    if np.isfinite(r["diff_se"]):
        text += f" ± {r['diff_se']:.{digits}f}"
        text += f" ({abs(r['diff']) / r['diff_se']:.1f} SE)" if r["diff_se"] > 0 else ""
    return f"**{text}**" if r["verdict"] in ("lower", "higher") else text


def differences_markdown(table: pd.DataFrame, z: float = Z) -> list:
    """Markdown lines of :func:`differences`: one row per (setting, M, method), one column per metric
    (its difference from the reference ± paired SE; bold where it exceeds ``z`` SEs)."""
    if not len(table):
        return []
    metrics = [m for m in METRICS if m in set(table["metric"])]
    reference = table["reference"].iloc[0]
    several_m = table.groupby("setting")["M"].nunique().max() > 1
    header = ["setting"] + (["M"] if several_m else []) + ["method"] + [f"{METRICS[m]} − {reference}" for m in metrics] \
        + ["pairs", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (setting, M, method), sub in table.groupby(["setting", "M", "method"], sort=False):
        by = {r["metric"]: r for r in sub.to_dict("records")}
        cells = [setting] + ([str(M)] if several_m else []) + [method]
        cells += [_diff_cell(by[m]) if m in by else "--" for m in metrics]
        cells.append(" / ".join(str(by[m]["pairs"]) if m in by else "0" for m in ("avg_regret", "cp")
                                if m == "avg_regret" or "cp" in metrics))
        stated = [f"{by[m]['verdict']} {METRICS[m]}" for m in metrics if m in by and by[m]["verdict"] in ("lower", "higher")]
        cells.append(", ".join(stated) or f"none separated by {z:g} SE")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def to_markdown(out, reference: str = REFERENCE, z: float = Z, studies=None) -> str:
    """Every study of ``out`` (or those named): its methods' paired differences from ``reference``."""
    out = Path(out)
    names = studies or [name for name, _ in stored_studies(out)]
    lines = [f"# Paired differences from {reference}", "",
             f"{out}: mean over the replications both methods have of (method − {reference}) at t = T ± its SE "
             f"(paired: the same environments); **bold** where it exceeds {z:g} paired SEs (the baselines' verdict "
             "rule). pairs: replications paired for R(T), pair R(T) and the error / for CP (those with intervals at "
             "T in both).", ""]
    found = False
    for study in names:
        table = differences(final_values(out, study), reference, z)
        if not len(table):
            continue
        found = True
        lines += [f"## {study}", ""] + differences_markdown(table, z) + [""]
    if not found:
        raise ValueError(f"no study of {out} holds {reference!r} beside another method in one setting: nothing to "
                         "compare (--reference NAME picks another reference method)")
    return "\n".join(lines).rstrip("\n") + "\n"


def across_markdown(out, other, z: float = Z, studies=None) -> str:
    """Every study stored in both ``out`` and ``other``: each method's paired difference out − other."""
    out, other = Path(out), Path(other)
    theirs = {name for name, _ in stored_studies(other)}
    names = [s for s in (studies or [name for name, _ in stored_studies(out)]) if s in theirs]
    if not names:
        raise ValueError(f"{out} and {other} hold no study of the same name: nothing to pair")
    lines = [f"# {out} against {other}", "",
             f"Mean ± SE in each run, and the paired difference ({out.name} − {other.name}) over the replications both "
             f"have (the same seeds) ± its SE; **bold** where it exceeds {z:g} paired SEs.", ""]
    for study in names:
        table = across(final_values(out, study), final_values(other, study), z)
        lines += [f"## {study}", "", "| setting | M | method | metric | " + f"{out.name} | {other.name} | difference | pairs |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in table.to_dict("records"):
            lines.append(f"| {r['setting']} | {r['M']} | {r['method']} | {METRICS[r['metric']]} | "
                         f"{_pm(r['mean'], r['se'])} ({r['reps']}) | {_pm(r['other_mean'], r['other_se'])} "
                         f"({r['other_reps']}) | {_diff_cell(r)} | {r['pairs']} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
