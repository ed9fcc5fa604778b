"""Bradley-Terry(-Luce) maximum likelihood for the LLM applications.

:func:`fit_btl` has the signature of :func:`study.fit_btl` (the bandit core's estimator) and calls
it; :func:`newton_fit` is a small self-contained Newton solver of the same objective, an
independent check of it.  Both return the sum-to-zero MLE: row k
compares item ``i[k]`` with item ``j[k]`` under context ``X[k]``; ``wins[k]`` of ``m[k]`` were won outright
by ``j[k]`` and ``ties[k]`` tied (a tie counts as half a win for each side: :mod:`study.core.outcomes`), and

    L(theta) = - sum_k [ score_k s_k - m_k log(1 + e^{s_k}) ],   s_k = X_k'(theta_{j_k} - theta_{i_k}),

with score_k = wins_k + ties_k / 2.

The fit is used offline (``python -m study.llm.prepare``) and when a bring-your-own-judgments file
is loaded; it is never on the per-step path of a replication.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..core.mle import fit_btl as core_fit_btl
from ..core.separation import separating_direction  # one home: the core refuses separable data too

__all__ = ["fit_btl", "newton_fit", "log_likelihood", "which_fitter", "separating_direction"]


def _rows(i, j, X, wins, m, n_items, ties=None):
    i = np.asarray(i, dtype=np.intp)
    j = np.asarray(j, dtype=np.intp)
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    wins = np.asarray(wins, dtype=float)
    m = np.broadcast_to(np.asarray(m, dtype=float), wins.shape).astype(float)
    if not (i.shape == j.shape == wins.shape == (X.shape[0],)):
        raise ValueError("i, j, wins and X must describe the same number of rows")
    if np.any(i == j) or i.min() < 0 or j.min() < 0 or max(i.max(), j.max()) >= n_items:
        raise ValueError("item indices must be distinct and lie in [0, n_items)")
    ties = np.zeros_like(wins) if ties is None else np.asarray(ties, dtype=float)
    if np.any(wins < 0) or np.any(ties < 0) or np.any(wins + ties > m):
        raise ValueError("wins and ties must be counts with wins + ties <= m")
    return i, j, X, wins + 0.5 * ties, m


def log_likelihood(theta, i, j, X, wins, m, ties=None) -> float:
    """Log-likelihood of ``theta`` (n, d) on comparison rows (a tie half a win for each side)."""
    if ties is not None:
        wins = np.asarray(wins, dtype=float) + 0.5 * np.asarray(ties, dtype=float)
    theta = np.asarray(theta, dtype=float)
    X = np.asarray(X, dtype=float)
    s = np.einsum("kd,kd->k", X, theta[j] - theta[i])
    return float(np.sum(wins * s - m * np.logaddexp(0.0, s)))


def newton_fit(i, j, X, wins, m, n_items, *, ties=None, ridge: float = 0.0, tol: float = 1e-10,
               max_steps: int = 200) -> np.ndarray:
    """Damped Newton for the (ridge-penalised) contextual BTL MLE; returns the sum-to-zero solution.

    The Hessian is singular along the shift directions theta_i += v (for all i); we add the
    projector onto them, which leaves the step in the sum-to-zero subspace unchanged.  Raises
    ``ValueError`` when the MLE does not exist (the iterates diverge: some item or direction is
    never beaten, a separable data set); pass ``ridge > 0`` to get the penalised estimate then.
    """
    i, j, X, wins, m = _rows(i, j, X, wins, m, n_items, ties)  # wins: the score, a tie half a win
    n, d = int(n_items), X.shape[1]
    nd = n * d
    # D_k = (e_j - e_i) (x) x_k, item-major (index a*d + c)
    shift = np.kron(np.ones((n, 1)), np.eye(d)) / np.sqrt(n)  # orthonormal basis of shifts
    proj = shift @ shift.T
    theta = np.zeros((n, d))

    def objective(th):
        return -log_likelihood(th, i, j, X, wins, m) + 0.5 * ridge * float(np.sum(th * th))

    value = objective(theta)
    for _ in range(max_steps):
        s = np.einsum("kd,kd->k", X, theta[j] - theta[i])
        p = expit(s)
        r = wins - m * p  # d loglik / d s
        g = np.zeros((n, d))
        np.add.at(g, j, r[:, None] * X)
        np.add.at(g, i, -r[:, None] * X)
        grad = -g.ravel() + ridge * theta.ravel()
        w = m * p * (1.0 - p)
        # Hessian blocks: H[a,b] = sum_k w_k z_ka z_kb x_k x_k'
        xx = w[:, None, None] * X[:, :, None] * X[:, None, :]  # (K, d, d)
        H = np.zeros((n, n, d, d))
        np.add.at(H, (i, i), xx)
        np.add.at(H, (j, j), xx)
        np.add.at(H, (i, j), -xx)
        np.add.at(H, (j, i), -xx)
        H = H.transpose(0, 2, 1, 3).reshape(nd, nd) + ridge * np.eye(nd) + proj
        scale = 1.0 + float(np.sum(m))
        if np.max(np.abs(grad - proj @ grad)) <= tol * scale:
            break
        try:
            step = np.linalg.solve(H, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, grad, rcond=None)[0]
        step -= proj @ step
        alpha = 1.0
        while True:
            candidate = theta - alpha * step.reshape(n, d)
            new_value = objective(candidate)
            if new_value <= value - 1e-4 * alpha * float(grad @ step) or alpha < 1e-10:
                break
            alpha *= 0.5
        theta, value = candidate, new_value
        if np.max(np.abs(theta)) > 1e3:
            raise ValueError("the BTL MLE does not exist for these comparisons (estimates diverge: "
                             "the data are separable); use a ridge penalty")
    return theta - theta.mean(axis=0)


def which_fitter() -> str:
    """The estimator :func:`fit_btl` uses (recorded by :mod:`study.llm.prepare`)."""
    return "study.fit_btl"


def fit_btl(i, j, X, wins, m, n_items, *, ties=None, ridge: float = 0.0) -> np.ndarray:
    """Sum-to-zero (ridge-penalised) contextual BTL MLE, (n_items, d): the core's estimator
    (:func:`study.fit_btl`); :func:`newton_fit` is an independent implementation that checks it."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    theta = np.asarray(core_fit_btl(i, j, X, wins, m, n_items, ties=ties, ridge=ridge), dtype=float)
    return theta - theta.mean(axis=0)
