"""What style control reports (:mod:`.style`): the style-controlled board beside the raw one --
``Rank (StyleCtrl)`` and its change from the raw rank, the scores with their intervals and
simultaneous rank intervals (:mod:`.ranks`, from the style fit's covariance) -- and the
coefficients (style features, position) with their intervals, as tables, Markdown and JSON.

Ranks: ``rank_style`` is the position by the style-controlled score (as the raw ``rank`` is by the
raw score; ``change`` = raw rank - style rank, positive when style control moves a model up);
``rank_style_ub`` is LMArena's convention, 1 + the number of models whose lower bound lies above
this model's upper bound (the sum-to-zero marginal CIs, also under an anchor, as the board's
``rank_ub``: :func:`.board.on_scale`; no joint guarantee); ``rank_lower``/``rank_upper`` the
simultaneous rank interval.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy.stats import norm

from .board import ELO_PER_LOGIT, on_scale
from .output import neutralised, plain, records
from .ranks import rank_intervals
from .style import StyleFit

SE_WORDS = {"model": "model-based", "sandwich": "sandwich (each comparison a unit)",
            "cluster": "judge-clustered (each judge a unit)"}
FEATURE_TEXT = {"length": "response length (tokens)", "headers": "markdown headers", "lists": "markdown list items",
                "bold": "bold spans", "position": "shown first (model_a's side)"}


def style_table(board, fit: StyleFit, raw_table: pd.DataFrame, *, scale: str = "logit", anchor=None) -> pd.DataFrame:
    """The style-controlled board, best first (module docstring); ``raw_table`` the board's table."""
    models = board.models
    z = float(norm.ppf(0.5 + board.level / 2.0))
    ranks = rank_intervals(fit.theta, fit.root, level=board.level, draws=board.draws, seed=board.seed)
    if anchor is not None and anchor[0] not in models:
        raise ValueError(f"anchor model {anchor[0]!r} is not on the leaderboard")
    # the board's scale, anchor and Rank (UB) conventions (board.on_scale)
    score, lower, upper, se, ub = on_scale(fit.theta, fit.root, z, scale=scale, anchor=None if anchor is None
                                           else (models.index(anchor[0]), anchor[1]))
    order = np.argsort(-score, kind="stable")
    rank_style = np.empty(len(models), dtype=np.int64)
    rank_style[order] = np.arange(1, len(models) + 1)
    raw = raw_table.set_index("model")
    frame = pd.DataFrame({
        "rank_style": rank_style, "rank_style_ub": ub, "model": models,
        "score": score, "lower": lower, "upper": upper,
        "se": se, "rank_lower": ranks.lower, "rank_upper": ranks.upper,
        "rank_raw": raw.loc[models, "rank"].to_numpy(), "score_raw": raw.loc[models, "score"].to_numpy()})
    frame["change"] = frame["rank_raw"] - frame["rank_style"]
    frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs.update({"scale": scale, "anchor": None if anchor is None else [anchor[0], float(anchor[1])],
                        "se_method": fit.se_method, "level": board.level, "features": list(fit.names),
                        "rank_interval": raw_table.attrs.get("rank_interval", ""), "newton_steps": fit.steps})
    return frame


def coefficient_table(fit: StyleFit, level: float) -> pd.DataFrame:
    """The style (and position) coefficients: logit per SD of the normalised feature (position:
    per side), with ``level`` intervals, z, a two-sided p-value, and the feature's normalisation."""
    n = len(fit.theta)
    se = fit.se[n:]
    z = float(norm.ppf(0.5 + level / 2.0))
    k = len(fit.mean)
    return pd.DataFrame({
        "feature": fit.names, "coefficient": fit.coef, "lower": fit.coef - z * se, "upper": fit.coef + z * se,
        "se": se, "z": fit.coef / se, "p_value": 2 * norm.sf(np.abs(fit.coef / se)),
        "elo": ELO_PER_LOGIT * fit.coef,
        "mean": np.concatenate([fit.mean, np.full(len(fit.names) - k, np.nan)]),
        "sd": np.concatenate([fit.sd, np.full(len(fit.names) - k, np.nan)])})


def _number(value, scale):
    return f"{value:.0f}" if scale == "elo" else f"{value:.3f}"


def markdown(table: pd.DataFrame, coefficients: pd.DataFrame) -> str:
    """The style-control section of the report."""
    meta = table.attrs
    scale = meta["scale"]
    level = meta["level"]
    features = [f for f in meta["features"] if f != "position"]
    what = []
    if features:
        what.append(f"shared coefficients on the battle's style ({', '.join(features)}: LMArena's normalised "
                    "differences (a - b) / (a + b + 1), standardised over the battles)")
    if "position" in meta["features"]:
        what.append("a position term (the log-odds advantage of the model shown first)")
    anchor = f"; anchored: {meta['anchor'][0]} = {meta['anchor'][1]:g}" if meta["anchor"] else ""
    lines = ["## Style control", "",
             f"The Bradley-Terry fit with {' and '.join(what)}, in one maximum-likelihood fit ({meta['newton_steps']} "
             f"Newton steps); {SE_WORDS[meta['se_method']]} SEs, {level:.0%} CIs{anchor}. Rank (StyleCtrl): the "
             "position by the style-controlled score; change: raw rank - style rank (up is positive); Rank (UB): 1 + the models "
             "whose lower bound is above this one's upper bound (LMArena's convention, marginal CIs); rank interval: "
             f"{meta['rank_interval'] or 'simultaneous'}.", "",
             f"| feature | coefficient (logit) | {level:.0%} CI | Elo points | z | p |",
             "|---|---:|:---:|---:|---:|---:|"]
    for r in coefficients.itertuples(index=False):
        lines.append(f"| {FEATURE_TEXT.get(r.feature, r.feature)} | {r.coefficient:.3f} | {r.lower:.3f} to "
                     f"{r.upper:.3f} | {r.elo:.1f} | {r.z:.2f} | {r.p_value:.2g} |")
    lines += ["", "| Rank (StyleCtrl) | change | Rank (UB) | rank interval | model | score | interval | raw rank | "
                  "raw score |", "|---:|---:|---:|:---:|---|---:|:---:|---:|---:|"]
    for r in table.itertuples(index=False):
        ranks = f"{r.rank_lower}" if r.rank_lower == r.rank_upper else f"{r.rank_lower}-{r.rank_upper}"
        change = "0" if r.change == 0 else f"{r.change:+d}"
        name = str(r.model).replace("|", "\\|")
        lines.append(f"| {r.rank_style} | {change} | {r.rank_style_ub} | {ranks} | {name} | "
                     f"{_number(r.score, scale)} | {_number(r.lower, scale)} to {_number(r.upper, scale)} | "
                     f"{r.rank_raw} | {_number(r.score_raw, scale)} |")
    return "\n".join(lines) + "\n"


def csv_text(table: pd.DataFrame) -> str:
    """The style table as CSV; a text cell that a spreadsheet would read as a formula is made inert
    (:func:`.output.neutralised`, as in every CSV the leaderboard writes)."""
    return neutralised(table).to_csv(index=False)


def as_json(table: pd.DataFrame, coefficients: pd.DataFrame) -> str:
    """The section as JSON: {"style_control": {what it is, "coefficients": [...], "models": [...]}}."""
    section = plain(dict(table.attrs))
    section.update(coefficients=records(coefficients), models=records(table))
    return json.dumps({"style_control": section}, indent=1) + "\n"
