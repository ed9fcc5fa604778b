"""The stored votes study (``OUT/votes``, written by :mod:`study.runner.votes`): its files, its
table and its figures.

* :func:`load` -- the committed parts (each checked against its SHA-256) as two DataFrames;
* :func:`summarise` -- per arena, k and method: runs, share decided, votes to a decision (median and
  10%/90% quantiles; an undecided run counts its budget, so a quantile at the budget is a lower
  bound, printed ">"), the error paid (share of runs that declared a wrong top-k set, with its
  one-sided 95% Clopper-Pearson upper bound) and the ratio to uniform: the geometric mean of the
  paired ratios votes(method, r) / votes(uniform, r) over the replications r (common random
  numbers), with its standard error by the delta method.  A run capped at the budget counts the
  budget: a pair where only uniform is capped understates the saving, one where only the method is
  capped understates its cost; the table gives the share of such pairs, and no ratio where most
  pairs are capped on both sides (nothing is measured there);
* :func:`fixed_budget` -- after N votes, the share of runs whose top-k set is right, with its SE;
* :func:`write_report` -- ``votes.md``, ``votes_summary.csv``, ``votes_fixed_budget.csv`` and the
  figures ``votes_to_decision.{png,pdf}`` and ``votes_fixed_budget.{png,pdf}`` under ``OUT/votes``.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import PlantedLink, StorageError
from . import files
from .figures import _plt, _save  # the paper's figures' style and atomic PDF/PNG writes
from .files import atomic_write_bytes, atomic_write_json

MANIFEST = "_manifest.json"
DATASETS = ("decisions", "fixed_budget")
_I32, _I64 = pa.int32(), pa.int64()
DECISIONS_SCHEMA = pa.schema([
    ("arena", pa.string()), ("method", pa.string()), ("rep", _I32), ("top", _I32), ("decided", pa.bool_()),
    ("votes", _I64), ("wrong", pa.bool_()), ("declared", pa.string()), ("n_items", _I32), ("budget", _I64),
    ("votes_told", _I64), ("looks", _I32), ("cpu_seconds", pa.float64()),
])
FIXED_BUDGET_SCHEMA = pa.schema([
    ("arena", pa.string()), ("method", pa.string()), ("rep", _I32), ("votes", _I64), ("top", _I32),
    ("right", pa.bool_()),
])
KEY = ("arena", "top", "rep")


def decisions_table(frames) -> pa.Table:
    """The decision rows of one task (DataFrames with the schema's columns) as an Arrow table."""
    return _table(frames, DECISIONS_SCHEMA)


def fixed_budget_table(frames) -> pa.Table:
    return _table(frames, FIXED_BUDGET_SCHEMA)


def _table(frames, schema) -> pa.Table:
    frame = pd.concat(list(frames), ignore_index=True) if frames else pd.DataFrame(columns=schema.names)
    missing = [c for c in schema.names if c not in frame.columns]
    if missing:
        raise ValueError(f"the votes engine returned no column(s) {missing}")
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

def check_layout(root: Path) -> None:
    """:class:`PlantedLink` if the study folder, its datasets or its manifest is a symbolic link
    (never followed: a planted link could make a run write or delete outside --out)."""
    root = Path(root)
    for path in (root, *(root / d for d in DATASETS), root / MANIFEST):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise PlantedLink(f"{path} is a symbolic link; links inside a study directory are never followed: "
                              "remove it, or give the directory it points to as --out")


def read_manifest(root: Path):
    """The votes study's manifest under ``root`` (None if there is none)."""
    check_layout(root)
    root = Path(root)
    manifest = files.read_manifest(root.parent, root.name)  # unreadable: StorageError naming it
    if manifest is not None and (manifest.get("study") != "votes" or not isinstance(manifest.get("parts"), dict)):
        raise StorageError(f"{root / MANIFEST}: not a votes study's manifest; choose another --out")
    return manifest


def write_manifest(root: Path, manifest: dict) -> None:
    atomic_write_json(manifest, Path(root) / MANIFEST)


def _sha256(path: Path):
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def committed(root: Path, manifest: dict, name: str) -> bool:
    """Is part ``name`` named by the manifest with both files' bytes matching their SHA-256?"""
    record = manifest.get("parts", {}).get(name)
    if not isinstance(record, dict):
        return False
    return all(isinstance(record.get(d), dict) and
               _sha256(Path(root) / d / f"{name}.parquet") == record[d].get("sha256") for d in DATASETS)


def discard(root: Path) -> None:
    """Delete a votes study (its manifest was read as one first: never another folder's files)."""
    root = Path(root)
    for d in DATASETS:
        if (root / d).is_dir() and not (root / d).is_symlink():
            shutil.rmtree(root / d)
    (root / MANIFEST).unlink(missing_ok=True)


def load(root) -> tuple:
    """(decisions, fixed_budget, manifest) of the committed parts under ``root``; a part whose bytes
    do not match its SHA-256 raises :class:`StorageError` naming it (rerun the job to recompute it)."""
    root = Path(root)
    manifest = read_manifest(root)
    if manifest is None:
        raise StorageError(f"{root}: no votes study here (run `python jobs/votes.py --out {root.parent}` first)")
    tables = {d: [] for d in DATASETS}
    for name in sorted(manifest["parts"]):
        for d in DATASETS:
            path = root / d / f"{name}.parquet"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise StorageError(f"{path}: missing or unreadable ({exc.strerror}); rerun the job to recompute it") from None
            if hashlib.sha256(data).hexdigest() != manifest["parts"][name][d]["sha256"]:
                raise StorageError(f"{path}: its bytes do not match the SHA-256 the manifest records; rerun the job "
                                   "to recompute it")
            tables[d].append(pq.read_table(io.BytesIO(data)))
    frames = [pa.concat_tables(tables[d]).to_pandas() if tables[d] else
              pa.Table.from_pylist([], schema=s).to_pandas()
              for d, s in zip(DATASETS, (DECISIONS_SCHEMA, FIXED_BUDGET_SCHEMA))]
    return frames[0], frames[1], manifest


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------

def _upper_bound(wrong: int, runs: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on the error rate."""
    from scipy.stats import beta
    return 1.0 if wrong >= runs else float(beta.ppf(level, wrong + 1, runs - wrong))


def summarise(decisions: pd.DataFrame, reference: str = "uniform") -> pd.DataFrame:
    """One row per (arena, top, method): see the module docstring for the columns' meaning."""
    rows = []
    ref = decisions[decisions["method"] == reference].set_index(list(KEY))["votes"]
    for (arena, top, method), g in decisions.groupby(["arena", "top", "method"], sort=False):
        runs = len(g)
        votes = g["votes"].to_numpy(dtype=float)
        q10, q50, q90 = np.quantile(votes, [0.1, 0.5, 0.9])
        budget = float(g["budget"].max())
        wrong = int(g["wrong"].sum())
        row = {"arena": arena, "top": int(top), "method": method, "runs": runs, "n_items": int(g["n_items"].iloc[0]),
               "budget": int(budget), "decided": float(g["decided"].mean()), "votes_median": q50, "votes_q10": q10,
               "votes_q90": q90, "error_paid": wrong / runs, "error_upper": _upper_bound(wrong, runs),
               "ratio": np.nan, "ratio_se": np.nan, "paired": 0, "capped_pairs": 0.0,
               "both_capped": 0.0}
        paired = g.set_index(list(KEY)).join(ref.rename("ref_votes"), how="inner")
        if method != reference and len(paired) >= 2:
            log_ratio = np.log(paired["votes"].to_numpy(float)) - np.log(paired["ref_votes"].to_numpy(float))
            mean, se = log_ratio.mean(), log_ratio.std(ddof=1) / np.sqrt(len(log_ratio))
            mine, ref_capped = paired["votes"] >= budget, paired["ref_votes"] >= budget
            row.update(ratio=float(np.exp(mean)), ratio_se=float(np.exp(mean) * se), paired=len(paired),
                       capped_pairs=float((mine | ref_capped).mean()), both_capped=float((mine & ref_capped).mean()))
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values(["arena", "top"], kind="stable").reset_index(drop=True) if len(out) else out


def fixed_budget(view: pd.DataFrame) -> pd.DataFrame:
    """Share of runs whose top-k set is right after N votes, per (arena, top, method, N), with its SE."""
    g = view.groupby(["arena", "top", "method", "votes"], sort=False)["right"]
    out = g.agg(runs="size", right="mean").reset_index()
    out["se"] = np.sqrt(out["right"] * (1 - out["right"]) / out["runs"])
    return out


def _votes_text(q: float, budget: int) -> str:
    return f">{budget:,}" if q >= budget else f"{q:,.0f}"


def markdown(summary: pd.DataFrame, arenas=None, methods=None) -> str:
    """The table of docs/votes.md: one section per arena, one row per (k, method)."""
    lines = []
    arenas = [a for a in (arenas or summary["arena"].unique()) if a in set(summary["arena"])]
    for arena in arenas:
        s = summary[summary["arena"] == arena]
        lines += [f"### {arena} ({int(s['n_items'].iloc[0])} items, budget {int(s['budget'].iloc[0]):,} votes)", "",
                  "| k | method | runs | decided | votes to decide: median [10%, 90%] | error paid (95% upper) "
                  "| ratio to uniform ± SE |", "|---|---|---|---|---|---|---|"]
        order = {m: i for i, m in enumerate(methods or s["method"].unique())}
        for _, r in s.sort_values(["top", "method"], key=lambda c: c.map(order) if c.name == "method" else c).iterrows():
            b = int(r["budget"])
            if r["method"] == "uniform":
                ratio = "(reference)"
            elif np.isnan(r["ratio"]) or r["both_capped"] >= 0.5:  # mostly budget against budget: not a measurement
                ratio = "–" if np.isnan(r["ratio"]) else f"– ({r['both_capped']:.0%} of pairs both capped)"
            else:
                ratio = f"{r['ratio']:.3f} ± {r['ratio_se']:.3f}" + (
                    f" ({r['capped_pairs']:.0%} of pairs capped)" if r["capped_pairs"] > 0 else "")
            lines.append(f"| {int(r['top'])} | {r['method']} | {int(r['runs'])} | {r['decided']:.0%} | "
                         f"{_votes_text(r['votes_median'], b)} [{_votes_text(r['votes_q10'], b)}, "
                         f"{_votes_text(r['votes_q90'], b)}] | {r['error_paid']:.3f} ({r['error_upper']:.3f}) | {ratio} |")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Figures and the report
# --------------------------------------------------------------------------------------------

def figure_votes(summary: pd.DataFrame, root: Path, arenas, methods) -> list:
    """Votes to a decision: rows = arenas, columns = k; per method its median (dot; hollow when most
    runs were undecided at the budget) and 10%-90% range, on a log axis."""
    plt = _plt()
    tops = sorted(summary["top"].unique())
    from matplotlib.ticker import NullFormatter
    height = max(1.6, 0.28 * len(methods) + 0.8)
    fig, axes = plt.subplots(len(arenas), len(tops), figsize=(3.4 * len(tops), height * len(arenas)),
                             squeeze=False, sharey=True, layout="constrained")
    for i, arena in enumerate(arenas):
        for j, top in enumerate(tops):
            ax = axes[i, j]
            s = summary[(summary["arena"] == arena) & (summary["top"] == top)].set_index("method")
            if s.empty:  # k >= n: no such decision
                ax.set_axis_off()
                continue
            for y, method in enumerate(methods):
                if method not in s.index:
                    continue
                r = s.loc[method]
                ax.plot([r["votes_q10"], r["votes_q90"]], [y, y], color="C0", lw=1.5)
                ax.plot(r["votes_median"], y, "o", color="C0", mfc="C0" if r["decided"] > 0.5 else "white")
                ax.axvline(r["budget"], color="grey", ls=":", lw=0.8)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_yticks(range(len(methods)), methods)
            ax.set_ylim(len(methods) - 0.5, -0.5)  # the reference (uniform) on top
            ax.set_title(f"{arena}: top {top}")
    for ax in axes[-1]:
        ax.set_xlabel("votes to a decision")
    fig.suptitle("Votes until the top k is decided (level 0.95): median, 10%-90%; hollow: most runs undecided "
                 "at the budget (dotted)")
    paths = _save(fig, root, "votes_to_decision")
    plt.close(fig)
    return paths


def figure_fixed_budget(view: pd.DataFrame, root: Path, arenas, methods) -> list:
    """After N votes, the share of runs whose top-k set is right (the declared one once decided)."""
    from matplotlib.ticker import NullFormatter
    plt = _plt()
    tops = sorted(view["top"].unique())
    fig, axes = plt.subplots(len(arenas), len(tops), figsize=(3.4 * len(tops), 2.2 * len(arenas)), squeeze=False,
                             layout="constrained")
    for i, arena in enumerate(arenas):
        for j, top in enumerate(tops):
            ax = axes[i, j]
            s = view[(view["arena"] == arena) & (view["top"] == top)]
            if s.empty:
                ax.set_axis_off()
                continue
            for k, method in enumerate(methods):
                m = s[s["method"] == method].sort_values("votes")
                if len(m):
                    ax.plot(m["votes"], m["right"], marker=".", color=f"C{k % 10}", label=method)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{arena}: top {top}")
    handles = {}
    for ax in axes.flat:  # one legend for the figure: a panel may be empty (k >= n)
        for line in ax.get_lines():
            handles.setdefault(line.get_label(), line)
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="outside lower center", ncols=min(len(handles), 6))
    fig.suptitle("After N votes: the share of runs whose top k is right (the declared set once decided)")
    for ax in axes[-1]:
        ax.set_xlabel("votes N")
    for ax in axes[:, 0]:
        ax.set_ylabel("share right at N")
    paths = _save(fig, root, "votes_fixed_budget")
    plt.close(fig)
    return paths


def write_report(root, *, plan_arenas=None, plan_methods=None) -> list:
    """Write the table (``votes.md``, ``votes_summary.csv``, ``votes_fixed_budget.csv``) and both
    figures under ``root`` from the stored parts; returns the paths written."""
    root = Path(root)
    decisions, view, _ = load(root)
    if decisions.empty:
        raise StorageError(f"{root}: no committed runs yet")
    arenas = [a for a in (plan_arenas or decisions["arena"].unique()) if a in set(decisions["arena"])]
    methods = [m for m in (plan_methods or decisions["method"].unique()) if m in set(decisions["method"])]
    summary = summarise(decisions)
    budget_view = fixed_budget(view)
    text = ("# Votes to a decision\n\nWritten by `python jobs/votes.py` from the stored runs (docs/votes.md says how "
            "to read it).\n\n" + markdown(summary, arenas, methods))
    atomic_write_bytes(text.encode(), root / "votes.md")
    atomic_write_bytes(summary.to_csv(index=False).encode(), root / "votes_summary.csv")
    atomic_write_bytes(budget_view.to_csv(index=False).encode(), root / "votes_fixed_budget.csv")
    paths = [root / "votes.md", root / "votes_summary.csv", root / "votes_fixed_budget.csv"]
    paths += figure_votes(summary, root, arenas, methods)
    paths += figure_fixed_budget(budget_view, root, arenas, methods)
    return paths
