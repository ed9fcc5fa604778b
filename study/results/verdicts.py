"""The verdict table of the baselines comparison: who wins what, by paired differences, per warm-up
protocol, and whether it holds under both.

Every method of a study sees the same environments (common random numbers), and the studies of one
seed namespace share them too (``baselines_random`` and ``baselines_greedy``: replication r of
Setting A is the same environment in both; ``llm_baselines_random`` and ``llm_baselines_greedy``
likewise on the LLM replay), so every difference here is *paired*: the mean over replications of
(method - winner) at t = T, with the standard error of that mean (the SD of the per-replication
differences / sqrt(reps)).  The studies of one warm-up are pooled (A and B with the replay: their
settings differ), so that every setting's verdict follows the same rule.

A method *wins* a metric (lower is better: the regret R(T), the pair regret, the relative error)
under one warm-up when its mean is the lowest and it is below every other method by more than
``z`` paired SEs (default 3: about a 5% family-wise level over the dozen comparisons of one
metric, by Bonferroni).  The verdict states a winner only where the same method wins under every
warm-up protocol of the comparison; otherwise it says on which warm-up the ranking depends, or
that no method is separated from the next.

``python -m study.results verdicts OUT`` writes ``OUT/verdicts.md`` and ``OUT/verdicts.csv`` (also
written by ``jobs/baselines.py`` when it finishes).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds

from ..policies import ALL_METHODS
from . import storage
from .stored import stored_studies

METRICS = {"avg_regret": "R(T)", "avg_pair_regret": "pair R(T)", "rel_error": "relative error"}
# the comparison's studies: A and B, and the LLM replay, under each of the two protocols
WARMUP_STUDIES = ("baselines_random", "baselines_greedy", "llm_baselines_random", "llm_baselines_greedy")
Z = 3.0
_KEYS = ["setting", "method", "rep"]


def _se(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def study_warmup(out, study) -> str:
    """The warm-up protocol a stored study ran (``Setting.warmup`` of its cells; ``"own"`` for
    results stored before the field existed, which is what they ran)."""
    manifest = storage.read_manifest(out, study) or {}
    cells = (manifest.get("fingerprint") or {}).get("cells") or []
    found = {(c.get("resolved_setting") or {}).get("warmup", "own") for c in cells}
    return found.pop() if len(found) == 1 else ("mixed" if found else "own")


def final_values(out, study) -> pd.DataFrame:
    """One row per (setting, method, rep): R(T), pair R(T) and the relative error at t = T, and
    ``before_phi``, the steps spent before Phi existed (NaN for results stored before it was)."""
    final = storage.load(out, study, columns=["T"] + list(METRICS), filter=ds.field("t") == ds.field("T"))
    final = final[final["M"] == final.groupby(["setting", "method"])["M"].transform("min")]  # one M per cell
    steps = storage.load(out, study, columns=["before_phi"])
    if steps["before_phi"].isna().any():
        counts = steps.groupby(_KEYS + ["M"], observed=True)["before_phi"].agg(lambda s: s.sum() if s.notna().all()
                                                                              else np.nan)
    else:
        counts = steps.groupby(_KEYS + ["M"], observed=True)["before_phi"].sum()
    final = final.merge(counts.rename("before_phi").reset_index(), on=_KEYS + ["M"], how="left")
    return final[_KEYS + list(METRICS) + ["before_phi"]].reset_index(drop=True)


def _order(methods) -> list:
    order = {m: i for i, m in enumerate(ALL_METHODS)}
    return sorted(methods, key=lambda m: (order.get(m, len(order)), m))


def paired(frame: pd.DataFrame, metric: str, a: str, b: str) -> tuple:
    """(mean, SE, replications) of a - b over the replications both have (one setting's rows)."""
    wide = frame.pivot_table(index="rep", columns="method", values=metric, observed=True)
    diff = (wide[a] - wide[b]).dropna()
    return float(diff.mean()), _se(diff), int(len(diff))


def winners(frame: pd.DataFrame, z: float = Z) -> pd.DataFrame:
    """Per setting and metric of one study's ``final_values``: every method's mean, SE, and paired
    difference from the lowest (the *leader*); ``wins`` marks a leader ahead of every other method
    by more than ``z`` paired SEs."""
    rows = []
    for setting, sub in frame.groupby("setting", observed=True):
        methods = _order(sub["method"].unique())
        for metric in METRICS:
            means = sub.groupby("method", observed=True)[metric].mean()
            leader = min(methods, key=lambda m: (means[m], methods.index(m)))
            diffs = {m: paired(sub, metric, m, leader) for m in methods if m != leader}
            clear = all(d > z * se for d, se, _ in diffs.values())
            for m in methods:
                values = sub.loc[sub["method"] == m, metric]
                d, se, _ = diffs.get(m, (0.0, 0.0, len(values)))
                rows.append({"setting": setting, "metric": metric, "method": m, "mean": float(values.mean()),
                             "se": _se(values), "leader": leader, "diff": d, "diff_se": se,
                             "wins": m == leader and clear})
    return pd.DataFrame(rows)


def by_warmup(out, studies) -> dict:
    """{warm-up: the :func:`final_values` of the studies of ``studies`` that ran it, pooled}: the
    studies of one warm-up hold different settings (A and B; the replay).

    Raises
    ------
    ValueError
        A study of ``studies`` is not stored under ``out``, or two studies of one warm-up hold the
        same setting.
    """
    pooled: dict = {}
    for study in studies:
        if not storage.parts(storage.dataset_dirs(out, study)["trajectory"]):
            raise ValueError(f"study {study!r} has no stored results under {out}; run jobs/baselines.py first")
        frame = final_values(out, study)
        pooled.setdefault(study_warmup(out, study), []).append((study, frame))
    result = {}
    for warmup, frames in pooled.items():
        seen: dict = {}
        for study, frame in frames:
            for setting in frame["setting"].unique():
                if setting in seen:
                    raise ValueError(f"studies {seen[setting]!r} and {study!r} both hold setting {setting} under "
                                     f"warm-up {warmup!r}; compare one of them")
                seen[setting] = study
        result[warmup] = pd.concat([f for _, f in frames], ignore_index=True)
    return result


def verdict_table(out, studies=WARMUP_STUDIES, z: float = Z) -> pd.DataFrame:
    """One row per (setting, metric, method): for each warm-up protocol of ``studies`` the mean, its
    SE and the paired difference from that warm-up's leader with its SE; and the verdict columns
    ``leader_<warmup>``, ``wins_<warmup>`` (missing where a setting was not run under a warm-up).

    Raises
    ------
    ValueError
        A study of ``studies`` is not stored under ``out``.
    """
    return combine({warmup: winners(frame, z) for warmup, frame in by_warmup(out, studies).items()})


def combine(by_warmup: dict) -> pd.DataFrame:
    """{warmup: :func:`winners` table} as one table, the columns suffixed by the warm-up."""
    tables = [table.rename(columns={c: f"{c}_{warmup}" for c in ("mean", "se", "leader", "diff", "diff_se", "wins")})
              for warmup, table in by_warmup.items()]
    merged = tables[0]
    for table in tables[1:]:
        merged = merged.merge(table, on=["setting", "metric", "method"], how="outer")
    methods = {m: i for i, m in enumerate(_order(merged["method"].unique()))}
    metrics = {m: i for i, m in enumerate(METRICS)}
    key = {"method": methods, "metric": metrics}
    return merged.sort_values(["setting", "metric", "method"], key=lambda c: c.map(key[c.name]) if c.name in key
                              else c).reset_index(drop=True)


def verdicts(table: pd.DataFrame, z: float = Z) -> list:
    """[(setting, metric, verdict text)] from :func:`verdict_table`: a winner only where the same
    method wins under every warm-up of the table."""
    warmups = [c[len("leader_"):] for c in table.columns if c.startswith("leader_")]
    lines = []
    for (setting, metric), sub in table.groupby(["setting", "metric"], sort=False):
        ran = [w for w in warmups if sub[f"leader_{w}"].notna().all()]
        if len(ran) < len(warmups):  # a verdict needs every warm-up
            lines.append((setting, METRICS[metric], f"stored under {' and '.join(ran) or 'no warm-up'} only: "
                          "no verdict", ""))
            continue
        leaders = {w: sub[f"leader_{w}"].iloc[0] for w in warmups}
        won = {w: bool(sub.loc[sub["method"] == leaders[w], f"wins_{w}"].iloc[0]) for w in warmups}
        parts = []
        for w in warmups:
            rest = sub[sub["method"] != leaders[w]]
            runner = rest.loc[rest[f"diff_{w}"].idxmin()]
            parts.append(f"{w}: {leaders[w]} {_fmt(sub.loc[sub['method'] == leaders[w], f'mean_{w}'].iloc[0])}, "
                         f"next {runner['method']} +{_fmt(runner[f'diff_{w}'])} ± {_fmt(runner[f'diff_se_{w}'])} "
                         f"({_ratio(runner[f'diff_{w}'], runner[f'diff_se_{w}'])})")
        same = len(set(leaders.values())) == 1
        if same and all(won.values()):
            text = f"**{next(iter(leaders.values()))}** (holds under {' and '.join(warmups)})"
        elif same:
            text = (f"{next(iter(leaders.values()))} leads under {' and '.join(warmups)} but is not separated by "
                    f"{z:g} SE under {', '.join(w for w in warmups if not won[w])}: no verdict")
        else:
            text = "depends on the warm-up: " + ", ".join(
                f"{leaders[w]} under {w}" + ("" if won[w] else f" (not separated by {z:g} SE)") for w in warmups)
        lines.append((setting, METRICS[metric], text, "; ".join(parts)))
    return lines


# the README's claims about pairs of methods (python -m study.results verdicts --pairs A:B ...)
CLAIMS = (("RB-UA", "RB"), ("TS", "ETA"), ("MaxPairUCB", "TS"), ("CoLSTIM", "CoLSTIM-rev"), ("CoLSTIM", "RB"),
          ("MaxInP", "RB"), ("GURO", "MaxInP"))


def pairwise(out, pairs=CLAIMS, studies=WARMUP_STUDIES, z: float = Z) -> pd.DataFrame:
    """For each pair (a, b), setting and metric: the paired difference a - b with its SE under each
    study's warm-up, and ``verdict``: ``"a < b"`` or ``"a > b"`` where it holds by more than ``z``
    SEs under every warm-up, ``"depends on the warm-up"`` where it holds one way under one and not
    under another, ``"not separated"`` otherwise.  Pairs with a method not stored are skipped."""
    frames = by_warmup(out, studies)
    rows = []
    for a, b in pairs:
        for setting in sorted(set.intersection(*(set(f["setting"]) for f in frames.values()))):
            for metric in METRICS:
                row = {"a": a, "b": b, "setting": setting, "metric": metric}
                signs = {}
                for warmup, frame in frames.items():
                    sub = frame[frame["setting"] == setting]
                    if not {a, b} <= set(sub["method"]):
                        break
                    d, se, _ = paired(sub, metric, a, b)
                    row.update({f"diff_{warmup}": d, f"diff_se_{warmup}": se})
                    signs[warmup] = 0 if not abs(d) > z * se else (1 if d > 0 else -1)
                else:
                    row["verdict"] = _pair_verdict(a, b, signs)
                    rows.append(row)
    return pd.DataFrame(rows)


def _pair_verdict(a, b, signs: dict) -> str:
    """The words for the signs {warmup: -1, 0, 1} of a - b (0: not separated)."""
    relation = {-1: f"{a} < {b}", 1: f"{a} > {b}"}
    values = set(signs.values())
    if len(values) == 1:
        return relation[values.pop()] if 0 not in values else "not separated"
    if {-1, 1} <= values:
        return "reversed by the warm-up: " + ", ".join(f"{relation[v]} under {w}" for w, v in signs.items() if v)
    held = [w for w, v in signs.items() if v]
    return (f"{relation[signs[held[0]]]} under {' and '.join(held)} only (not separated under "
            f"{', '.join(w for w, v in signs.items() if not v)})")


def warmup_steps(out, studies=WARMUP_STUDIES) -> pd.DataFrame:
    """Steps spent before Phi existed (``before_phi``) and R(T) (``regret``), per setting, method and
    warm-up (mean and SE over replications), and ``dR``, ``dR_se``: the paired effect of the warm-up on
    R(T) (the second warm-up minus the first, where a setting ran under both)."""
    frames = by_warmup(out, studies)
    rows = []
    for warmup, frame in frames.items():
        for (setting, method), sub in frame.groupby(["setting", "method"], observed=True):
            rows.append({"setting": setting, "method": method, "warmup": warmup,
                         "before_phi": float(sub["before_phi"].mean()), "before_phi_se": _se(sub["before_phi"]),
                         "regret": float(sub["avg_regret"].mean()), "regret_se": _se(sub["avg_regret"])})
    table = pd.DataFrame(rows)
    if len(frames) > 1:
        a, b = list(frames.values())[:2]
        both = a.merge(b, on=_KEYS, suffixes=("_a", "_b"))
        effect = both.assign(d=both["avg_regret_b"] - both["avg_regret_a"]).groupby(["setting", "method"])["d"]
        effect = effect.agg(["mean", _se]).rename(columns={"mean": "dR", "_se": "dR_se"}).reset_index()
        table = table.merge(effect, on=["setting", "method"], how="left")
    order = {m: i for i, m in enumerate(_order(table["method"].unique()))}
    return table.sort_values(["setting", "method", "warmup"], key=lambda c: c.map(order) if c.name == "method"
                             else c).reset_index(drop=True)


def _ratio(diff, se) -> str:
    """A lead in paired SEs ("identical" when both runs chose alike in every replication)."""
    if not se > 0:
        return "identical" if diff == 0 else "no spread"
    return f"{diff / se:.1f} SE"


def _fmt(x, digits=3) -> str:
    return "--" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def to_markdown(table: pd.DataFrame, steps: pd.DataFrame, studies=WARMUP_STUDIES, z: float = Z,
                claims: pd.DataFrame | None = None) -> str:
    """The verdicts, the claims about pairs, the full table of paired differences and the steps
    spent before Phi, as Markdown."""
    warmups = [c[len("leader_"):] for c in table.columns if c.startswith("leader_")]
    lines = ["# Verdicts of the baselines comparison", "",
             f"Studies {', '.join(studies)} (warm-ups {', '.join(warmups)}); paired differences over the same "
             f"replications at t = T; a method wins when it is below every other by more than {z:g} paired SEs; "
             "a verdict is stated only where the same method wins under every warm-up.", "",
             "| setting | metric | verdict | per warm-up: leader, next, lead ± SE |", "|---|---|---|---|"]
    lines += [f"| {s} | {m} | {v} | {p} |" for s, m, v, p in verdicts(table, z)]
    if claims is not None and len(claims):
        lines += ["", f"## Pairs: a − b, paired, per warm-up (a verdict where it holds by {z:g} SE under every warm-up)", "",
                  "| a − b | setting | metric | " + " | ".join(warmups) + " | verdict |",
                  "|" + "---|" * (4 + len(warmups))]
        for r in claims.to_dict("records"):
            cells = [f"{r['a']} − {r['b']}", r["setting"], METRICS[r["metric"]]]
            cells += [f"{r[f'diff_{w}']:+.3f} ± {_fmt(r[f'diff_se_{w}'])} ({_ratio(abs(r[f'diff_{w}']), r[f'diff_se_{w}'])})"
                      for w in warmups]
            lines.append("| " + " | ".join(cells + [r["verdict"]]) + " |")
    lines += ["", "## Every method: mean ± SE, and paired difference from the leader ± SE", ""]
    header = ["setting", "metric", "method"] + [f"{w}: mean" for w in warmups] + [f"{w}: − leader" for w in warmups]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in table.itertuples(index=False):
        r = r._asdict()
        cells = [r["setting"], METRICS[r["metric"]], r["method"]]
        cells += [f"{_fmt(r[f'mean_{w}'])} ± {_fmt(r[f'se_{w}'])}" for w in warmups]
        cells += [("**leader**" if r["method"] == r[f"leader_{w}"] else f"+{_fmt(r[f'diff_{w}'])} ± {_fmt(r[f'diff_se_{w}'])}")
                  for w in warmups]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Steps spent before Φ existed (mean ± SE per replication) and the warm-up's effect on R(T)", ""]
    lines += ["| setting | method | " + " | ".join(f"{w}: steps before Φ | {w}: R(T)" for w in warmups)
              + (f" | R(T) {warmups[1]} − {warmups[0]} (paired)" if len(warmups) > 1 else "") + " |",
              "|" + "---|" * (2 + 2 * len(warmups) + (len(warmups) > 1))]
    for (setting, method), sub in steps.groupby(["setting", "method"], sort=False):
        by = {r.warmup: r for r in sub.itertuples(index=False)}
        cells = [setting, method]
        for w in warmups:
            r = by.get(w)
            cells += ([f"{_fmt(r.before_phi, 1)} ± {_fmt(r.before_phi_se, 1)}", f"{_fmt(r.regret)} ± {_fmt(r.regret_se)}"]
                      if r is not None else ["--", "--"])
        if len(warmups) > 1:
            r = sub.iloc[0]
            cells.append(f"{r['dR']:+.3f} ± {_fmt(r['dR_se'])}" if pd.notna(r.get("dR")) else "--")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_verdicts(out, studies=WARMUP_STUDIES, z: float = Z, pairs=CLAIMS):
    """Write OUT/verdicts.md and OUT/verdicts.csv (atomically; the csv holds :func:`verdict_table`)
    from the studies of ``studies`` stored under ``out``; returns their paths, or () when those do
    not cover two warm-ups (e.g. only ``baselines_random`` and ``baselines_greedy`` are stored:
    verdicts for A and B alone)."""
    out = Path(out)
    stored = {name for name, _ in stored_studies(out)}
    studies = [s for s in studies if s in stored]
    if len({study_warmup(out, s) for s in studies}) < 2:
        return ()
    table = verdict_table(out, studies, z)
    steps = warmup_steps(out, studies)
    claims = pairwise(out, pairs, studies, z)
    md, csv = out / "verdicts.md", out / "verdicts.csv"
    storage.atomic_write_bytes(to_markdown(table, steps, studies, z, claims).encode("utf-8"), md)
    storage.atomic_write_bytes(table.to_csv(index=False).encode("utf-8"), csv)
    return md, csv
