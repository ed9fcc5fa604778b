"""The summary table (DIR/summary.csv and DIR/summary.md), from the stored Parquet alone.

One row per study, setting, method and M: the number of replications, the final average regret
R(T), the final relative error, the same two at t = T0 (the end of stage 1; CSV only), and (where
intervals were recorded) the coverage at t = T, each as a mean over replications with its Monte
Carlo standard error.  The coverage of a replication is
the fraction of its n x d intervals at t = T that cover the truth; CP is the mean of that fraction
and its SE the replication-to-replication SD / sqrt(reps) (which accounts for the dependence
between the intervals of one replication).  Where intervals were recorded it also gives their
time-uniform coverage (:mod:`.uniform`): per coordinate, the fraction of replications covered at
every grid time from the first CI on, averaged over the coordinates, for the fixed-time CIs
(``tu_ci``) and the confidence sequences (``tu_cs``), with Monte Carlo SEs, the lowest
coordinate's (``*_min``), and the median CS/CI width ratio at t = T.

``summary.md`` also gives, under each study's table, every method's paired difference from a
reference method (default RB) in R(T), pair R(T), the relative error and CP, with paired Monte Carlo
SEs and the baselines' verdict rule (:mod:`.compare`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

from ..policies import ALL_METHODS as METHOD_ORDER  # table order: the paper's five, the baselines, then others
from . import compare, storage, uniform
from .stored import stored_studies, study_commits, study_info

KEYS = ["study", "setting", "method", "M"]
COLUMNS = KEYS + ["T0", "T", "reps", "final_regret", "final_regret_se", "final_rel_error",
                  "final_rel_error_se", "cp", "cp_se", "cp_reps", "final_pair_regret", "final_pair_regret_se",
                  "t0_regret", "t0_regret_se", "t0_rel_error", "t0_rel_error_se"]
UNIFORM_COLUMNS = ["tu_ci", "tu_ci_se", "tu_ci_min", "tu_cs", "tu_cs_se", "tu_cs_min", "tu_reps", "ci_width_T",
                   "cs_width_T", "cs_ci_ratio_T"]
COLUMNS += UNIFORM_COLUMNS


def _se(x):
    x = np.asarray(x, dtype=float)
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def study_summary(out, study) -> pd.DataFrame:
    dirs = storage.dataset_dirs(out, study)
    if not storage.parts(dirs["trajectory"]):
        return pd.DataFrame(columns=COLUMNS)
    final = storage.load(out, study, columns=["T0", "T", "avg_regret", "rel_error", "avg_pair_regret"],
                        filter=ds.field("t") == ds.field("T"))
    g = final.groupby(["setting", "method", "M", "T0", "T"], observed=True)
    table = g.agg(reps=("rep", "nunique"), final_regret=("avg_regret", "mean"),
                  final_regret_se=("avg_regret", _se), final_rel_error=("rel_error", "mean"),
                  final_rel_error_se=("rel_error", _se), final_pair_regret=("avg_pair_regret", "mean"),
                  final_pair_regret_se=("avg_pair_regret", _se)).reset_index()
    at_t0 = storage.load(out, study, columns=["T0", "T", "avg_regret", "rel_error"],
                         filter=(ds.field("t") == ds.field("T0")) & (ds.field("T0") > 0))
    if len(at_t0):
        t0 = at_t0.groupby(["setting", "method", "M", "T0", "T"], observed=True).agg(
            t0_regret=("avg_regret", "mean"), t0_regret_se=("avg_regret", _se),
            t0_rel_error=("rel_error", "mean"), t0_rel_error_se=("rel_error", _se)).reset_index()
        table = table.merge(t0, on=["setting", "method", "M", "T0", "T"], how="left")
    else:
        table[["t0_regret", "t0_regret_se", "t0_rel_error", "t0_rel_error_se"]] = np.nan
    table["cp"] = np.nan
    table["cp_se"] = np.nan
    table["cp_reps"] = 0
    if storage.parts(dirs["intervals"]):
        T_of = {(r.setting, r.method, r.M): r.T for r in table.itertuples()}
        ints = storage.load(out, study, "intervals", columns=["covered"])
        if len(ints):
            T_row = np.array([T_of.get(k, -1) for k in zip(ints["setting"], ints["method"], ints["M"])])
            at_T = ints[ints["t"].to_numpy() == T_row]
            per_rep = at_T.groupby(["setting", "method", "M", "rep"], observed=True)["covered"].mean()
            cp = per_rep.groupby(["setting", "method", "M"], observed=True).agg(["mean", _se, "size"])
            for (setting, method, M), row in cp.iterrows():
                mask = (table["setting"] == setting) & (table["method"] == method) & (table["M"] == M)
                table.loc[mask, ["cp", "cp_se", "cp_reps"]] = [row["mean"], row["_se"], int(row["size"])]
    tu = uniform.study_uniform(out, study, {(r.setting, r.method, r.M): r.T for r in table.itertuples()}) \
        if storage.parts(dirs["intervals"]) else pd.DataFrame(columns=uniform.CELL)
    table = table.merge(tu, on=uniform.CELL, how="left") if len(tu) else table
    for column in UNIFORM_COLUMNS:
        if column not in table:
            table[column] = np.nan
    table.insert(0, "study", study)
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    table["_o"] = table["method"].map(lambda m: order.get(m, len(order)))
    table = table.sort_values(["setting", "M", "_o"]).drop(columns="_o").reset_index(drop=True)
    return table[COLUMNS]


def summary_table(out) -> pd.DataFrame:
    """One row per (study, setting, method, M) of every study stored under ``out``."""
    frames = [study_summary(out, s) for s, _ in stored_studies(out)]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _pm(mean, se, digits=4):
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "--"
    if se is None or np.isnan(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def to_markdown(table: pd.DataFrame, info=None, made_at=None, paired=None) -> str:
    """The summary as Markdown, one section per study in table order; ``info`` maps a study to
    its (figure family, title) (:func:`study.results.stored.study_info`), the name being the
    title otherwise; ``made_at`` maps a study to its (commits, package versions)
    (:func:`study.results.stored.study_commits`); ``paired`` maps a study to its paired differences
    from a reference method (:func:`study.results.compare.differences`), shown under its table.
    The text ends with a newline."""
    info, made_at, paired = info or {}, made_at or {}, paired or {}
    lines = ["# Summary of the stored results", "",
             "Mean over replications ± Monte Carlo standard error, at t = T. "
             "R(T) = average regret (of the major item, the paper's eq:regret); pair R(T) = the average regret of "
             "both compared items, ((x'θ*_best − x'θ*_i) + (x'θ*_best − x'θ*_j))/2; error = max_i ||θ̂_i − θ*_i|| / max_i ||θ*_i||; "
             "CP = fraction of the n·d 95% intervals (debiased estimate ± 1.96 model-based SE, the paper's Φ11) "
             "covering the truth at t = T; uniform CI / uniform CS = time-uniform coverage: per coordinate, the "
             "fraction of replications whose fixed-time CI / confidence sequence (95%, tightest at t = T) covers "
             "θ*_ik at every grid time from the first CI on, averaged over the coordinates (lowest coordinate in "
             "brackets); CS/CI = median width ratio at t = T.", ""]
    for study in dict.fromkeys(table["study"]):
        sub = table[table["study"] == study]
        _, title = info.get(study, (None, study))
        with_cp = sub["cp"].notna().any()
        with_pair = sub["final_pair_regret"].notna().any()
        lines += [f"## {title}", ""]
        commits, versions = made_at.get(study, ((), ()))
        if commits or versions:
            lines += [_made_at(commits, versions), ""]
        header = (["setting", "method", "M", "T0", "T", "reps", "R(T)"] + (["pair R(T)"] if with_pair else [])
                  + ["rel. error"] + (["CP"] if with_cp else []))
        with_tu = with_cp and sub["tu_ci"].notna().any()
        header += ["uniform CI", "uniform CS", "CS/CI"] if with_tu else []
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in sub.itertuples():
            cells = ([r.setting, r.method, str(r.M), str(r.T0), str(r.T), str(r.reps),
                      _pm(r.final_regret, r.final_regret_se)]
                     + ([_pm(r.final_pair_regret, r.final_pair_regret_se)] if with_pair else [])
                     + [_pm(r.final_rel_error, r.final_rel_error_se)])
            if with_cp:
                cells.append(_pm(r.cp, r.cp_se, 3))
            if with_tu:
                cells += [_uniform(r.tu_ci, r.tu_ci_se, r.tu_ci_min), _uniform(r.tu_cs, r.tu_cs_se, r.tu_cs_min),
                          "--" if pd.isna(r.cs_ci_ratio_T) else f"{r.cs_ci_ratio_T:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        differences = paired.get(study)
        if differences is not None and len(differences):
            reference = differences["reference"].iloc[0]
            lines += [f"Paired differences from {reference} (the same replications; mean of method − {reference} ± "
                      f"its SE; **bold** where it exceeds {compare.Z:g} paired SEs, the baselines' verdict rule; "
                      "`python -m study.results compare OUT --reference NAME`):", ""]
            lines += compare.differences_markdown(differences) + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _uniform(mean, se, lowest) -> str:
    if pd.isna(mean):
        return "--"
    return _pm(mean, se, 3) + ("" if pd.isna(lowest) else f" [{lowest:.2f}]")


def _made_at(commits, versions) -> str:
    """"Made at commit 1032e2c (package 0.1.0)." from a manifest's records."""
    short = [c[:7] + ("-dirty" if c.endswith("-dirty") else "") for c in commits]
    text = ("Made at commit" + ("s " if len(short) > 1 else " ") + ", ".join(f"`{c}`" for c in short)) if short \
        else "Made at an unrecorded commit"
    return text + (f" (package {', '.join(versions)})." if versions else ".")


def write_summary(out, reference: str = compare.REFERENCE):
    """Write DIR/summary.csv and DIR/summary.md (each atomically), the latter with every study's paired
    differences from the method ``reference``; returns their paths."""
    out = Path(out)
    table = summary_table(out)
    studies = list(dict.fromkeys(table["study"]))
    info = {study: study_info(out, study) for study in studies}
    made_at = {study: study_commits(out, study) for study in studies}
    paired = {study: compare.differences(compare.final_values(out, study), reference) for study in studies}
    csv_path, md_path = out / "summary.csv", out / "summary.md"
    for path, text in ((csv_path, table.to_csv(index=False)), (md_path, to_markdown(table, info, made_at, paired))):
        storage.atomic_write_bytes(text.encode("utf-8"), path)
    return csv_path, md_path
