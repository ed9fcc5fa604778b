"""Ranking diagrams (the paper's section "Applications to Language Model Ranking").

Point version (the paper's): an edge i -> j when model i's score x'theta_i exceeds model j's
score x'theta_j for more than 95% of the question contexts x, under the estimate theta(t).

Uncertainty-aware version: an edge i -> j when the 95% confidence interval of x'(theta_i -
theta_j), built from the debiased estimate theta_d and the *full* covariance Phi_11 (an nd x nd
matrix, item-major index i*d + k, so that Var x'(theta_i - theta_j) = x'(Phi_ii + Phi_jj - Phi_ij -
Phi_ji)x including the cross-item covariances), lies above 0 for more than 95% of the contexts.

Both relations are acyclic for n < 20 (a cycle of length L would need every context to
satisfy L orderings that cannot all hold, i.e. a fraction > 0.95 L of L - 1), so the diagram is a
DAG.  The transitive reduction removes i -> k whenever k is reachable from i through another model
(i -> j -> ... -> k); on a transitively closed relation this is exactly the paper's rule
"remove i -> k when i -> j and j -> k".

Layout: the height of a model encodes only the arrows, i.e. the order the data support.  A model
that some arrow touches sits one level below the lowest model that beats it (the longest chain of
arrows above it); models in one level, and the models no arrow touches (drawn apart, in a grey
band: the data order them against no other model), are placed in label order, so that neither
their height nor their left-to-right order reads as a ranking.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import norm

__all__ = ["scores", "dominance", "dominance_ci", "transitive_reduction", "layers", "diagram_positions",
           "draw_diagram", "plot_ranking_diagrams", "DIAGRAM_TIMES"]

DIAGRAM_TIMES = tuple(range(200, 1601, 200))


def scores(theta, contexts) -> np.ndarray:
    """(Q, n) matrix of x_q' theta_i."""
    theta = np.asarray(theta, dtype=float)
    contexts = np.asarray(contexts, dtype=float)
    if theta.ndim != 2 or contexts.ndim != 2 or theta.shape[1] != contexts.shape[1]:
        raise ValueError(f"theta (n, d) and contexts (Q, d) disagree: {theta.shape} vs {contexts.shape}")
    return contexts @ theta.T


def dominance(theta, contexts, threshold: float = 0.95) -> np.ndarray:
    """Boolean (n, n): [i, j] when x'theta_i > x'theta_j for more than ``threshold`` of the contexts."""
    S = scores(theta, contexts)
    frac = (S[:, :, None] > S[:, None, :]).mean(axis=0)
    return frac > threshold


def dominance_ci(theta_d, phi11, contexts, threshold: float = 0.95, level: float = 0.95) -> np.ndarray:
    """Boolean (n, n): [i, j] when the ``level`` CI of x'(theta_i - theta_j) excludes 0 on the positive
    side for more than ``threshold`` of the contexts.  ``phi11`` is the (nd, nd) covariance of the
    debiased estimate ``theta_d`` (n, d), item-major (index i*d + k)."""
    theta_d = np.asarray(theta_d, dtype=float)
    n, d = theta_d.shape
    phi = np.asarray(phi11, dtype=float)
    if phi.shape != (n * d, n * d):
        raise ValueError(f"phi11 must be ({n * d}, {n * d}) for theta_d of shape {theta_d.shape}, got {phi.shape}")
    X = np.asarray(contexts, dtype=float)
    S = scores(theta_d, X)  # (Q, n)
    blocks = phi.reshape(n, d, n, d)
    # q[c, i, j] = x_c' Phi_ij x_c
    q = np.einsum("ca,iajb,cb->cij", X, blocks, X)
    diag = np.einsum("cii->ci", q)
    var = diag[:, :, None] + diag[:, None, :] - q - q.transpose(0, 2, 1)
    se = np.sqrt(np.maximum(var, 0.0))
    z = norm.ppf(0.5 + level / 2.0)
    lower = S[:, :, None] - S[:, None, :] - z * se
    frac = (lower > 0).mean(axis=0)
    np.fill_diagonal(frac, 0.0)
    return frac > threshold


def _check_adjacency(adj) -> np.ndarray:
    adj = np.asarray(adj, dtype=bool)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adjacency must be a square matrix, got shape {adj.shape}")
    adj = adj.copy()
    np.fill_diagonal(adj, False)
    return adj


def _reachability(adj: np.ndarray) -> np.ndarray:
    """reach[i, k]: a path of length >= 1 from i to k (Warshall)."""
    reach = adj.copy()
    for j in range(len(adj)):
        reach |= reach[:, j:j + 1] & reach[j:j + 1, :]
    return reach


def transitive_reduction(adj) -> np.ndarray:
    """Remove i -> k whenever k is reachable from i through another node.  ``adj`` must be acyclic."""
    adj = _check_adjacency(adj)
    reach = _reachability(adj)
    if np.any(np.diag(reach)):
        raise ValueError("the dominance graph has a cycle; its transitive reduction is not unique")
    # redundant[i, k]: some j with i -> j and j ~> k
    redundant = (adj.astype(np.int64) @ reach.astype(np.int64)) > 0
    return adj & ~redundant


def layers(adj) -> np.ndarray:
    """Longest-path layer of each node: 0 for models nothing beats, else 1 + max layer of a parent."""
    adj = _check_adjacency(adj)
    n = len(adj)
    layer = np.zeros(n, dtype=int)
    for _ in range(n):
        new = np.array([max([layer[u] + 1 for u in np.flatnonzero(adj[:, v])], default=0) for v in range(n)])
        if np.array_equal(new, layer):
            return layer
        layer = new
    raise ValueError("the dominance graph has a cycle; it cannot be layered")


def diagram_positions(adj, labels) -> dict:
    """{model: (x, y)}: ordered models in levels (the longest chain of arrows above them; level 0
    on top, y from 1 down to 0), models no arrow touches in a bottom band (y < 0); within a level
    or the band, in label order (alphabetical), never by score."""
    adj = _check_adjacency(adj)
    n = len(adj)
    touched = adj.any(axis=0) | adj.any(axis=1)
    layer = layers(adj)
    levels = sorted({int(layer[v]) for v in range(n) if touched[v]})
    depth = max(len(levels) - 1, 1)
    rows = [[v for v in range(n) if touched[v] and layer[v] == level] for level in levels]
    loose = [v for v in range(n) if not touched[v]]
    pos = {}
    for k, members in enumerate(rows):
        y = 1.0 - k / depth
        for rank, v in enumerate(sorted(members, key=lambda v: (str(labels[v]).lower(), v))):
            pos[v] = ((rank + 0.5) / len(members), y)
    for rank, v in enumerate(sorted(loose, key=lambda v: (str(labels[v]).lower(), v))):
        pos[v] = ((rank + 0.5) / len(loose), -0.45 if rows else 0.5)
    return pos


def draw_diagram(ax, adj, labels, mean_scores=None, title=None, reduce: bool = True):
    """Draw one ranking diagram on a matplotlib axis: best at the top, heights from the arrows
    only (:func:`diagram_positions`; ``mean_scores`` is accepted for compatibility and not used:
    a score the data do not separate must not place a model)."""
    adj = _check_adjacency(adj)
    shown = transitive_reduction(adj) if reduce else adj
    n = len(adj)
    pos = diagram_positions(adj, labels)
    loose = [v for v in range(n) if not (adj[v].any() or adj[:, v].any())]
    ordered = n - len(loose)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.75 if loose and ordered else -0.2, 1.2)
    ax.axis("off")
    if loose and ordered:  # the models the data order against no other, apart
        from matplotlib.patches import FancyBboxPatch
        ax.add_patch(FancyBboxPatch((-0.03, -0.62), 1.06, 0.34, boxstyle="round,pad=0.01", fc="0.93", ec="none",
                                    zorder=0))
        ax.text(0.5, -0.66, "no supported order", ha="center", va="top", fontsize=6, color="0.35")
    elif loose:
        ax.text(0.5, 0.2, "no supported order yet", ha="center", va="top", fontsize=6.5, color="0.35")
    for i, j in zip(*np.nonzero(shown)):
        ax.annotate("", xy=pos[j], xytext=pos[i],
                    arrowprops=dict(arrowstyle="-|>", color="0.3", lw=1.0, shrinkA=11, shrinkB=11))
    widest = max(sum(1 for q in pos.values() if q[1] == y) for _, y in pos.values())
    size = 6.5 if widest <= 3 else 5.5 if widest <= 5 else 4.5
    for v in range(n):
        ax.text(*pos[v], str(labels[v]), ha="center", va="center", fontsize=size, parse_math=False,  # "$x$" as text
                bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="0.4", lw=0.8))
    if title:
        ax.set_title(title, fontsize=9, parse_math=False)  # a store's or model's name may hold "$"
    return shown


def plot_ranking_diagrams(panels, contexts, labels, path=None, *, uncertainty: bool = False, threshold=0.95,
                          level=0.95, caption=None, ncols: int = 4, title=None):
    """One panel per time.  ``panels`` maps t to theta(t) (point version) or, with
    ``uncertainty=True``, to (theta_d, phi11) or to None (CI not yet available).  Returns the figure
    (saved to ``path`` when given) and a dict t -> reduced adjacency (None where unavailable)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    times = sorted(panels)
    nrows = int(np.ceil(len(times) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows + (0.5 if caption else 0)))
    axes = np.atleast_1d(axes).ravel()
    reduced = {}
    for ax, t in zip(axes, times):
        value = panels[t]
        if uncertainty:
            if value is None:
                ax.axis("off")
                ax.set_title(f"t = {t}: CI not available", fontsize=9)
                reduced[t] = None
                continue
            theta, phi = value
            adj = dominance_ci(theta, phi, contexts, threshold, level)
        else:
            theta = value
            adj = dominance(theta, contexts, threshold)
        reduced[t] = draw_diagram(ax, adj, labels, title=f"t = {t}")
    for ax in axes[len(times):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    if caption:
        fig.text(0.5, 0.01, caption, ha="center", va="bottom", fontsize=7, wrap=True)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
    else:
        fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig, reduced
