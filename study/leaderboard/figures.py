"""The leaderboard's figures, drawn to PNG bytes (written only once everything has succeeded):

* ``scores.png``: every model's score with its interval, best at the top, the rank interval beside
  the name;
* ``win_rates.png``: the observed share of a's comparisons with b that a won (a tie half), models
  in leaderboard order (grey: never compared);
* ``win_probabilities.png``: the predicted probability that the row model beats the column model,
  1 / (1 + e^{-(s_row - s_col)}) from the scores at the table's context, leaderboard order;
* ``battle_counts.png``: the comparisons of every pair (log colour scale; white: never compared);
* ``ranks.png``: every model's simultaneous rank interval as a bar with its rank, best at the top --
  one row per model, so that it stays legible at 100 models and more;
* ``diagram.png`` (contextual data): the paper's ranking diagram over the contexts -- an arrow
  i -> j when the ``level`` CI of x'(theta_i - theta_j) lies above 0 for more than 95% of the
  contexts (:mod:`study.llm.diagrams`), transitive reduction, best at the top; drawn up to
  ``DIAGRAM_MAX_MODELS`` models (beyond, its levels are a hairball: ``ranks.png`` says the same
  legibly), over at most ``DIAGRAM_CONTEXTS`` contexts (a seeded sample).

Model names are drawn as text, never as mathematics: every ``$`` is escaped (:func:`label`), so a
name such as ``$\\foo$`` is shown as written and cannot reach matplotlib's mathtext parser.
"""
from __future__ import annotations

import io
import multiprocessing
import os
import textwrap
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..llm.diagrams import dominance_ci, draw_diagram
from .output import header

DIAGRAM_MAX_MODELS = 12
DIAGRAM_CONTEXTS = 2000
ANNOTATE_MAX_MODELS = 25


def label(text) -> str:
    """``text`` as matplotlib shows it literally: ``$`` escaped (no mathtext)."""
    return str(text).replace("$", r"\$")


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
    labels = [f"{label(model)}  [{lo}-{hi}]" if lo != hi else f"{label(model)}  [{lo}]"
              for model, lo, hi in zip(table["model"], table["rank_lower"], table["rank_upper"])]
    font = 7 if n <= 60 else 5.5
    ax.set_yticks(y, labels, fontsize=font)
    ax.set_ylim(-1, n)
    ax.set_xlabel("score (Elo-style)" if meta["scale"] == "elo" else "score (logit)")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    fig.text(0.01, 0.995, label(textwrap.fill(" ".join(header(meta)[:2]), 150)), fontsize=5.5, va="top")
    _margins(fig, max(map(len, labels)), font, top_in=0.75, bottom_in=0.5)
    return _png(fig)


def _matrix_figure(table, matrix, title, *, cmap="RdBu", norm=None, vmin=0.0, vmax=1.0, fmt="{:.2f}",
                   colorbar=None) -> bytes:
    """A models x models matrix in leaderboard order, annotated up to ``ANNOTATE_MAX_MODELS``."""
    plt = _pyplot()
    n = len(table)
    size = min(12.0, 4.5 + 0.1 * n)
    fig, ax = plt.subplots(figsize=(size + 1.0, size + 0.4))
    colours = plt.get_cmap(cmap).with_extremes(bad="0.85" if norm is None else "white")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=colours, norm=norm,
                      **({} if norm is not None else {"vmin": vmin, "vmax": vmax}))
    ticks = np.arange(n)
    font = 7 if n <= 40 else 4
    names = [label(name) for name in table["model"]]
    ax.set_yticks(ticks, names, fontsize=font)
    if n <= 40:
        ax.set_xticks(ticks, names, rotation=90, fontsize=font)
        opponent = "opponent"
    else:  # many models: the opponents by rank (the row labels name them), every fifth
        ax.set_xticks(ticks[::5], [str(k + 1) for k in ticks[::5]], fontsize=font + 1)
        opponent = "opponent (its rank)"
    if n <= ANNOTATE_MAX_MODELS:
        for a in range(n):
            for b in range(n):
                if np.isfinite(matrix[a, b]):
                    ax.text(b, a, fmt.format(matrix[a, b]), ha="center", va="center", fontsize=5.5)
    ax.set_xlabel(opponent)
    ax.set_ylabel("model")
    bar = fig.colorbar(image, ax=ax, fraction=0.04)
    if colorbar:
        bar.set_label(colorbar, fontsize=7)
    fig.text(0.01, 0.995, label(title), fontsize=6.5, va="top")
    chars = max(len(name) for name in names)
    _margins(fig, chars, font, top_in=0.45, bottom_in=0.45 + (0.55 * font / 72 * chars if n <= 40 else 0.2),
             right_in=0.9)
    return _png(fig)


def _order(table, models):
    return [models.index(name) for name in table["model"]]


def win_rate_figure(table, rates, models) -> bytes:
    order = _order(table, models)
    return _matrix_figure(table, rates[np.ix_(order, order)],
                          f"Observed win rates of {table.attrs['source']}: the row model's share of its comparisons "
                          "with the column model (a tie half);\nleaderboard order; grey: never compared")


def win_probability_figure(table) -> bytes:
    """P(row beats column) = 1 / (1 + exp(-(s_row - s_col))) from the table's scores (logit or Elo)."""
    score = table["score"].to_numpy(float)
    logit = score / (400.0 / np.log(10.0)) if table.attrs.get("scale") == "elo" else score
    matrix = 1.0 / (1.0 + np.exp(-(logit[:, None] - logit[None, :])))
    np.fill_diagonal(matrix, np.nan)
    return _matrix_figure(table, matrix, f"Predicted win probabilities of {table.attrs['source']} (Bradley-Terry, "
                                         "from the scores): P(the row model beats the column model);\n"
                                         "leaderboard order", colorbar="P(row beats column)")


def battle_count_figure(table, counts, models) -> bytes:
    """The comparisons of every pair, log colour scale."""
    from matplotlib.colors import LogNorm
    order = _order(table, models)
    matrix = counts[np.ix_(order, order)].astype(float)
    matrix[matrix == 0] = np.nan
    top = np.nanmax(matrix) if np.isfinite(matrix).any() else 1.0
    return _matrix_figure(table, matrix, f"Battle counts of {table.attrs['source']}: comparisons of each pair "
                                         "(log colour scale);\nleaderboard order; white: never compared",
                          cmap="viridis", norm=LogNorm(vmin=1.0, vmax=max(top, 2.0)), fmt="{:.0f}",
                          colorbar="comparisons")


def rank_figure(table) -> bytes:
    """Every model's simultaneous rank interval (bar) and rank (dot), best at the top."""
    plt = _pyplot()
    n = len(table)
    font = 7 if n <= 60 else 5.5
    fig, ax = plt.subplots(figsize=(7.5, 1.3 + 0.15 * n))
    y = np.arange(n)[::-1]
    lower, upper = table["rank_lower"].to_numpy(), table["rank_upper"].to_numpy()
    ax.hlines(y, lower - 0.35, upper + 0.35, color="C0", lw=min(6.0, 200.0 / max(n, 1)), alpha=0.35)
    ax.plot(table["rank"], y, "o", ms=3 if n <= 60 else 2, color="C0")
    names = [label(name) for name in table["model"]]
    ax.set_yticks(y, names, fontsize=font)
    ax.set_ylim(-1, n)
    ax.set_xlim(0.3, n + 0.7)
    ax.set_xlabel("rank (dot: by score; bar: simultaneous rank interval)")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    ax.xaxis.set_ticks_position("both")
    ax.tick_params(axis="x", labeltop=True, labelsize=6)
    fig.text(0.01, 0.995, label(f"Rank intervals of {table.attrs['source']}: {table.attrs['rank_interval']}"),
             fontsize=6, va="top")
    _margins(fig, max(map(len, names)), font, top_in=0.6, bottom_in=0.45)
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
    draw_diagram(ax, adjacency, [label(name) for name in board.models], title=f"Ranking diagram over {len(contexts):,} contexts")
    fig.text(0.5, 0.01, f"Arrow i -> j: the {level:.0%} CI of x'(theta_i - theta_j) lies above 0 for > 95% of the "
                        f"contexts ({board.result.se_method} SE). Transitive reduction; best at the top.",
             ha="center", va="bottom", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return _png(fig)


def battle_counts(board) -> np.ndarray:
    """(n, n): the comparisons of every pair (symmetric)."""
    p, n = board.pairs, len(board.models)
    counts = np.zeros((n, n))
    np.add.at(counts, (p.i, p.j), p.m)
    return counts + counts.T


def draw_many(jobs) -> dict:
    """{folder + file name: PNG bytes} of several boards' figures (``jobs``: (board, table, folder)
    triples), drawn in two forked processes where there are two boards and two cores: one board's
    figures do not depend on another's, and matplotlib draws on one core (``--by``'s boards)."""
    global _JOBS
    workers = min(len(jobs), os.cpu_count() or 1, 2)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        drawn = [draw(board, table) for board, table, _ in jobs]
    else:
        _JOBS = jobs  # inherited by the forked workers: the boards are not pickled
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                drawn = list(pool.map(_draw_job, range(len(jobs))))
        finally:
            _JOBS = None
    return {folder + name: data for (_, _, folder), figures in zip(jobs, drawn) for name, data in figures.items()}


_JOBS = None


def _draw_job(k: int) -> dict:
    board, table, _ = _JOBS[k]
    return draw(board, table)


def draw(board, table) -> dict:
    """{file name: PNG bytes} of the figures (module docstring)."""
    figures = {"scores.png": scores_figure(table),
               "win_rates.png": win_rate_figure(table, board.win_rates(), board.models),
               "win_probabilities.png": win_probability_figure(table),
               "battle_counts.png": battle_count_figure(table, battle_counts(board), board.models),
               "ranks.png": rank_figure(table)}
    if board.battles.contextual:
        contexts = board.battles.contexts
        diagram = diagram_figure(board, contexts, board.level)
        if diagram is not None:
            figures["diagram.png"] = diagram
    return figures
