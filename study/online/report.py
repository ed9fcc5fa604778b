"""What a ranker shows: its CIs, its ranking at one context, its ranking diagram over a set of
contexts (the paper's section "Applications to Language Model Ranking"), and the text of
``python -m study.online show``.  Every table and figure with an interval names its standard
errors: ``model`` (the paper's Phi_11) or ``sandwich`` (robust; :mod:`study.core.sandwich`)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..core import _validate as check
from ..llm.diagrams import dominance, dominance_ci, draw_diagram, transitive_reduction

SE_TEXT = {"model": "model-based SE (the paper's Phi_11, Bernoulli comparisons)",
           "sandwich": "sandwich SE (robust: the comparisons' own variance, ties as half wins)",
           "cluster": "judge-clustered sandwich SE (each named judge a unit; a tell of no named judge its own)"}


def _unavailable(result) -> ValueError:
    return ValueError("confidence intervals are not available yet: the told outcomes do not identify theta "
                      f"(Psi_t is singular, condition number {result.condition:.3g}); tell more outcomes")


def intervals(result, labels, level: float = 0.95, factor=None) -> pd.DataFrame:
    """One row per (item, dim): the debiased estimate, its SE and CI (or, with ``factor``, the
    interval estimate -/+ factor x SE: a confidence sequence), and which SE it is."""
    if not result.available:
        raise _unavailable(result)
    if factor is None:
        lower, upper = result.ci(level)
    else:
        lower, upper = result.theta_d - factor * result.se, result.theta_d + factor * result.se
    n, d = result.theta_d.shape
    items, dims = np.meshgrid(np.arange(n), np.arange(d), indexing="ij")
    frame = pd.DataFrame({"item": items.ravel(), "name": np.asarray(labels, dtype=object)[items.ravel()],
                          "dim": dims.ravel(), "estimate": result.theta_d.ravel(), "se": result.se.ravel(),
                          "lower": lower.ravel(), "upper": upper.ravel(), "level": level,
                          "anytime": factor is not None, "se_method": result.se_method})
    frame.attrs["se_method"] = result.se_method
    return frame


class Table(pd.DataFrame):
    """A DataFrame that prints whole: every column, however narrow the terminal (pandas' own
    repr hides the middle columns, here ``se`` and ``lower``, behind "...").  What is computed
    from it is a plain DataFrame."""

    @property
    def _constructor(self):
        return pd.DataFrame

    def __repr__(self) -> str:
        return self.to_string()


def ranking(theta, result, x, labels, level: float = 0.95, factor=None) -> pd.DataFrame:
    """Items ranked at context x, best first: one row per item with ``score`` (x'theta^d_i, the
    debiased estimate: the centre of the interval and the order of the ranking, as in the stopping
    rule), ``se``, ``lower``, ``upper`` (its CI; with ``factor``: score -/+ factor x SE, a confidence
    sequence) and ``estimate`` (x'theta_i, the current fit the policy acts on).  While the told
    rows do not identify theta there are no intervals: ``score`` is then the estimate, the interval
    columns NaN, and the order the estimate's (``attrs["score"]`` says which)."""
    level = check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    estimate = theta @ x
    if result.available:
        score = result.theta_d @ x
        se = np.sqrt(np.maximum(result.spread(x), 0.0))
    else:
        score, se = estimate, np.full(len(estimate), np.nan)
    half = (norm.ppf(0.5 + level / 2.0) if factor is None else factor) * se
    order = np.argsort(-score, kind="stable")
    frame = Table({"rank": np.arange(1, len(score) + 1), "item": order,
                   "name": np.asarray(labels, dtype=object)[order], "score": score[order], "se": se[order],
                   "lower": (score - half)[order], "upper": (score + half)[order], "estimate": estimate[order],
                   "level": level, "anytime": factor is not None, "se_method": result.se_method})
    frame.attrs["se_method"] = result.se_method
    frame.attrs["score"] = "debiased" if result.available else "estimate"
    return frame


MAX_DIAGRAM_ITEMS = 40  # beyond this a diagram is unreadable
MAX_DIAGRAM_CONTEXTS = 2000  # the first distinct told contexts


def told_contexts(X) -> np.ndarray:
    """The first :data:`MAX_DIAGRAM_CONTEXTS` distinct contexts of the told rows ``X``, in order."""
    _, first = np.unique(X, axis=0, return_index=True)
    return X[np.sort(first)[:MAX_DIAGRAM_CONTEXTS]]


def diagram(theta, result, contexts, labels, *, path=None, level=0.95, threshold=0.95, title=None, format=None):
    """The reduced adjacency of the ranking diagram (point version when ``result`` is None);
    drawn to ``path`` (a file name or a binary file; ``format``: matplotlib's, e.g. "svg") when given."""
    if result is None:
        adjacency = dominance(theta, contexts, threshold)
        rule = f"x'theta_i > x'theta_j for > {threshold:.0%} of the {len(contexts)} contexts"
    else:
        if not result.available:
            raise _unavailable(result)
        adjacency = dominance_ci(result.theta_d, result.phi11, contexts, threshold, level)
        rule = (f"the {level:.0%} CI of x'(theta_i - theta_j) lies above 0 for > {threshold:.0%} of the "
                f"{len(contexts)} contexts; {SE_TEXT[result.se_method]}")
    reduced = transitive_reduction(adjacency)
    if path is not None:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        n = len(labels)
        fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * n), 4.2))
        draw_diagram(ax, adjacency, labels, (contexts @ theta.T).mean(axis=0), title=title)
        fig.text(0.5, 0.01, f"Arrow i -> j: {rule}. Transitive reduction; best at the top.", ha="center",
                 va="bottom", fontsize=7, wrap=True)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(path, dpi=150, format=format)
        plt.close(fig)
    return reduced


def show_text(ranker, *, level: float = 0.95, se: str = "model", anytime: bool = False, top: int = 1) -> str:
    """The text of ``python -m study.online show``: the arguments, the counts, the ranking with CIs
    (confidence sequences with ``anytime``) at the mean told context, and the stopping rule's
    verdict for the top ``top`` items by the confidence sequences."""
    c = ranker.config
    counts = ranker.counts()
    lines = [f"{ranker.path}: an online ranker (study.online)",
             f"  items: {c.n_items}, context dimension d = {c.dim}, "
             f"graph: {'every pair' if c.edges is None else f'{len(c.edges)} pairs'}",
             f"  policy {c.policy}; T = {c.T}, T0 = {c.T0}, M = {c.M}, alpha = {c.alpha:g}, gamma = {c.gamma:g}, "
             f"c_lambda = {c.c_lambda:g}, tie-break {c.tie_break}",
             f"  asked {counts['asked']}: told {counts['told']}, open {counts['open']}, expired {counts['expired']}; "
             f"{counts['comparisons']} comparisons told, {counts['ties']} of them ties"]
    if counts["asked"] == 0:
        return "\n".join(lines + ["  nothing asked yet"])
    x = ranker.mean_context()
    table = ranker.ranking(x, level=level, se=se, anytime=anytime)
    kind = (f"{level:.0%} confidence sequences (anytime-valid)" if anytime else f"{level:.0%} CIs (fixed-time)")
    lines.append(f"Ranking at the mean told context (x = {np.array2string(x, precision=3, max_line_width=200)}), "
                 f"{kind} of x'theta_i, {SE_TEXT[table.attrs['se_method']]}:")
    if table["se"].isna().all():
        lines.append("  (no CIs yet: the told outcomes do not identify theta; score = estimate, x'theta_i)")
    else:
        lines.append("  score = x'theta^d_i, the debiased estimate (the interval's centre and the order); "
                     "estimate = x'theta_i, the current fit the policy uses")
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        hidden = ["level", "anytime", "se_method"] + ([] if table["retired"].any() else ["retired"])
        lines.append(table.drop(columns=hidden).to_string(index=False, float_format="%.4f"))
    if top < c.n_items:
        from .stopping import decision_text, tightest
        lines.append(decision_text(ranker.decision(level, top, x, se), c.labels, level=level, top=top,
                                   tightest_at=tightest(c)))
    return "\n".join(lines)
