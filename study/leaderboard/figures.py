"""The leaderboard's figures, drawn to PNG bytes (written only once everything has succeeded):

* ``scores.png``: every model's score with its interval, best at the top, the rank interval beside
  the name;
* ``win_rates.png``: the observed share of a's comparisons with b that a won (a tie half), models
  in leaderboard order (grey: never compared);
* ``diagram.png`` (contextual data): the paper's ranking diagram over the contexts -- an arrow
  i -> j when the ``level`` CI of x'(theta_i - theta_j) lies above 0 for more than 95% of the
  contexts (:mod:`study.llm.diagrams`), transitive reduction, best at the top; drawn up to
  ``DIAGRAM_MAX_MODELS`` models, over at most ``DIAGRAM_CONTEXTS`` contexts (a seeded sample).
"""
from __future__ import annotations

import io
import textwrap

import numpy as np

from ..llm.diagrams import dominance_ci, draw_diagram
from .output import header

DIAGRAM_MAX_MODELS = 40
DIAGRAM_CONTEXTS = 2000
ANNOTATE_MAX_MODELS = 25


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def _png(fig) -> bytes:
    buffer = io.BytesIO()  # light compression: a third of the encoding time, files a little larger
    fig.savefig(buffer, format="png", dpi=110, pil_kwargs={"compress_level": 1})
    _pyplot().close(fig)
    return buffer.getvalue()


def _margins(fig, left_chars: int, font: float, top_in: float, bottom_in: float, right_in: float = 0.3):
    """Fixed margins from the longest label (tight_layout measures every label: seconds at 100 models)."""
    width, height = fig.get_size_inches()
    left = min(0.6, (0.45 + 0.55 * font / 72 * left_chars) / width)
    fig.subplots_adjust(left=left, right=1 - right_in / width, top=1 - top_in / height, bottom=bottom_in / height)


def scores_figure(table) -> bytes:
    plt = _pyplot()
    meta = table.attrs
    n = len(table)
    fig, ax = plt.subplots(figsize=(7.5, 1.6 + 0.17 * n))
    y = np.arange(n)[::-1]
    ax.errorbar(table["score"], y, xerr=[table["score"] - table["lower"], table["upper"] - table["score"]],
                fmt="o", ms=3, color="C0", ecolor="0.45", elinewidth=1, capsize=2)
    labels = [f"{model}  [{lo}-{hi}]" if lo != hi else f"{model}  [{lo}]"
              for model, lo, hi in zip(table["model"], table["rank_lower"], table["rank_upper"])]
    font = 7 if n <= 60 else 5.5
    ax.set_yticks(y, labels, fontsize=font, parse_math=False)  # a "$" in a name is text
    ax.set_ylim(-1, n)
    ax.set_xlabel("score (Elo-style)" if meta["scale"] == "elo" else "score (logit)")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    fig.text(0.01, 0.995, textwrap.fill(" ".join(header(meta)[:2]), 150), fontsize=5.5, va="top", parse_math=False)
    _margins(fig, max(map(len, labels)), font, top_in=0.75, bottom_in=0.5)
    return _png(fig)


def win_rate_figure(table, rates, models) -> bytes:
    plt = _pyplot()
    order = [models.index(name) for name in table["model"]]
    matrix = rates[np.ix_(order, order)]
    n = len(order)
    size = min(12.0, 4.5 + 0.1 * n)
    fig, ax = plt.subplots(figsize=(size + 1.0, size + 0.4))
    cmap = plt.get_cmap("RdBu").with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0, vmax=1)
    ticks = np.arange(n)
    font = 7 if n <= 40 else 4
    ax.set_yticks(ticks, table["model"], fontsize=font, parse_math=False)
    if n <= 40:
        ax.set_xticks(ticks, table["model"], rotation=90, fontsize=font, parse_math=False)
        opponent = "opponent"
    else:  # many models: the opponents by rank (the row labels name them), every fifth
        ax.set_xticks(ticks[::5], [str(k + 1) for k in ticks[::5]], fontsize=font + 1)
        opponent = "opponent (its rank)"
    if n <= ANNOTATE_MAX_MODELS:
        for a in range(n):
            for b in range(n):
                if np.isfinite(matrix[a, b]):
                    ax.text(b, a, f"{matrix[a, b]:.2f}", ha="center", va="center", fontsize=5.5)
    ax.set_xlabel(opponent)
    ax.set_ylabel("model")
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.text(0.01, 0.995, f"Observed win rates of {table.attrs['source']}: the row model's share of its comparisons "
                          "with the column model (a tie half);\nleaderboard order; grey: never compared",
             fontsize=6.5, va="top", parse_math=False)
    chars = max(len(str(name)) for name in table["model"])
    _margins(fig, chars, font, top_in=0.45, bottom_in=0.45 + (0.55 * font / 72 * chars if n <= 40 else 0.2),
             right_in=0.9)
    return _png(fig)


def diagram_figure(board, contexts, level: float) -> bytes | None:
    """The ranking diagram over ``contexts`` (None beyond ``DIAGRAM_MAX_MODELS`` models)."""
    if len(board.models) > DIAGRAM_MAX_MODELS:
        return None
    if len(contexts) > DIAGRAM_CONTEXTS:
        pick = np.random.default_rng(0).choice(len(contexts), DIAGRAM_CONTEXTS, replace=False)
        contexts = contexts[np.sort(pick)]
    result = board.result
    adjacency = dominance_ci(result.theta_d, result.phi11, contexts, 0.95, level)
    plt = _pyplot()
    n = len(board.models)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * n), 4.4))
    draw_diagram(ax, adjacency, board.models, title=f"Ranking diagram over {len(contexts):,} contexts")
    fig.text(0.5, 0.01, f"Arrow i -> j: the {level:.0%} CI of x'(theta_i - theta_j) lies above 0 for > 95% of the "
                        f"contexts ({board.result.se_method} SE). Transitive reduction; best at the top.",
             ha="center", va="bottom", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return _png(fig)


def draw(board, table) -> dict:
    """{file name: PNG bytes} of the figures (module docstring)."""
    figures = {"scores.png": scores_figure(table),
               "win_rates.png": win_rate_figure(table, board.win_rates(), board.models)}
    if board.battles.contextual:
        contexts = board.battles.contexts
        diagram = diagram_figure(board, contexts, board.level)
        if diagram is not None:
            figures["diagram.png"] = diagram
    return figures
