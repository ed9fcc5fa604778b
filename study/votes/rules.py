"""The pair-choice methods of the votes study that are not registered policies of
:mod:`study.policies` (those -- RB, ETA, MaxPairUCB, ... -- run through the same loop by name).

Every method here follows the policy protocol (:class:`study.Step` in, :class:`study.Choice`
out) and two more hooks the engine (:mod:`.engine`) calls: ``look(view)`` at each look, with the
shared estimate (:class:`LookView`), and ``update(step, choice, wins)`` after each step's votes.

``uniform``
    A uniformly random allowed pair (the step's shared ``edge`` uniform), its major item a random
    end (``end``): :func:`study.policies.base.random_edge`.
``arena_active``
    Chatbot Arena's active sampling rule (Chiang et al. 2024, "Chatbot Arena: An Open Platform
    for Evaluating LLMs by Human Preference", Section 5, eq. (9)):

        P_t(a) proportional to  sqrt(Sigma_{t,a,a} / |{t : A_t = a}|) - sqrt(Sigma_{t,a,a} / (|{t : A_t = a}| + 1)),

    the expected shrinkage of pair a's interval from one more battle.  Adaptations: (1) a battle
    is a step (M votes on one pair), so |{t : A_t = a}| counts steps; (2) Sigma_{t,a,a}, in the
    paper the diagonal of the covariance of its inverse-propensity win-matrix estimator, is here
    the variance of one vote on pair a, p(1 - p) with p the pair's told win rate of its second
    model (ties half a win) smoothed by one win and one loss, (w + 1) / (m + 2), so that a pair
    whose votes all went one way keeps a positive probability (the unsmoothed variance 0 would
    never sample it again); (3) while some allowed pair has no battle its weight is infinite (the
    formula's limit): a uniformly random unplayed pair; (4) it ignores contexts (the paper's rule
    has none): in contextual arenas it pools a pair's votes over contexts.  The pair is drawn by
    inverting the CDF at the step's shared ``edge`` uniform; the major item is a random end.
    Its state is counts, updated after every step (it needs no fitted estimate).
``fisher``
    D-optimal next pair: the allowed pair (a, b) maximising det(J + w_ab r r') with r =
    (e_a - e_b) (x) x_t, J the Fisher information of the told votes at the estimate theta and
    w_ab = M sigma'(x_t'(theta_b - theta_a)); by the matrix determinant lemma (on the sum-zero
    space where J is invertible) the maximiser of w_ab r'J^+ r.  J is recomputed at each look at
    the look's MLE theta; between looks it grows by each chosen pair's w r r' (Sherman-Morrison on
    J^+, weights at the look's theta), so that successive steps do not repeat one pair.  Ties go
    to the first pair in ``edges`` order.  Before the first look with an MLE: ``uniform``.
``lucb``
    An identification rule for the stopping rule, in the spirit of LUCB (Kalyanakrishnan, Tewari,
    Auer & Stone, ICML 2012, "PAC subset selection in stochastic multi-armed bandits"): for each k
    still undecided, the candidate set S_k (top k by the debiased score x_c'theta_d) and, over
    S_k x (not S_k) and the decision contexts x_c, its most ambiguous pair (i_k, j_k): the
    smallest standardised lower bound x_c'(theta_d_i - theta_d_j) / sd_ij - f_k, f_k the
    confidence-sequence factor of the rule (Bonferroni over the k (n - k) pairs and the contexts),
    sd_ij from J^+ (kept up to date between looks as in ``fisher``).  LUCB samples the weakest of S
    and the strongest outside; with pairwise votes, and a graph where (i, j) may not be a pair,
    the vote goes to the allowed pair that most reduces the variances of those contrasts
    g_k = (e_i_k - e_j_k) (x) x_c (c-optimal), each relative to its current variance and summed over
    the undecided k:

        sum_k  w_ab (g_k'J^+ r)^2 / ((1 + w_ab r'J^+ r) g_k'J^+ g_k),

    so that no k starves (a contrast that got few votes has the larger relative reduction) and a
    pair shared by two k serves both.  Ties go to the first pair; before the first look with a
    debiased estimate: ``uniform``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import expit

from ..core.confseq import cs_factor
from ..policies.base import Choice, random_edge

RULES = ("uniform", "arena_active", "fisher", "lucb")


@dataclass
class LookView:
    """What a look hands a method: the shared estimate and the state of the decision.

    Attributes
    ----------
    votes : int
        Votes told.
    theta : ndarray (n, d) or None
        The MLE on the told votes (None while it does not exist).
    result : DebiasResult or None
        The debiased estimate at theta (None while theta does not exist).
    rows : dict
        The told votes aggregated by (pair, context): ``i``, ``j``, ``X``, ``wins``, ``ties``, ``m``.
    undecided : tuple of int
        The k (top-k sizes) not decided yet.
    decision_contexts : ndarray (C, d)
    level : float
        The rule's level (split over the C contexts and the k (n - k) pairs by Bonferroni).
    tightest_at : float
        Votes at which the confidence sequences are tightest.
    """

    votes: int
    theta: object
    result: object
    rows: dict
    undecided: tuple
    decision_contexts: np.ndarray
    level: float
    tightest_at: float


class Uniform:
    """``uniform`` (module docstring)."""

    def __init__(self, episode):
        pass

    def select(self, step):
        return random_edge(step)


class ArenaActive:
    """``arena_active``: Chiang et al. (2024) eq. (9), with the adaptations of the module docstring."""

    def __init__(self, episode):
        self.edges = episode.edges
        self.M = episode.M
        self.battles = np.zeros(len(self.edges))
        self.hi_wins = np.zeros(len(self.edges))  # votes won by the pair's second (hi) model, ties half
        self.votes = np.zeros(len(self.edges))
        self._index = {(int(a), int(b)): e for e, (a, b) in enumerate(self.edges)}

    def probabilities(self) -> np.ndarray:
        """P_t over ``edges`` (eq. (9), adapted)."""
        unplayed = self.battles == 0
        if unplayed.any():
            return unplayed / unplayed.sum()
        p = (self.hi_wins + 1.0) / (self.votes + 2.0)
        sigma = p * (1.0 - p)
        weight = np.sqrt(sigma / self.battles) - np.sqrt(sigma / (self.battles + 1.0))
        return weight / weight.sum()

    def select(self, step):
        cdf = np.cumsum(self.probabilities())
        e = min(int(np.searchsorted(cdf, step.edge * cdf[-1], side="right")), len(cdf) - 1)
        a, b = (int(v) for v in self.edges[e])
        return Choice(a, b, False) if step.end < 0.5 else Choice(b, a, False)

    def update(self, step, choice, wins):
        a, b = choice.major, choice.other
        e = self._index[(min(a, b), max(a, b))]
        self.battles[e] += 1
        self.votes[e] += self.M
        self.hi_wins[e] += wins if b > a else self.M - wins


def information(theta, rows, n, d) -> np.ndarray:
    """The Fisher information of the told votes at theta, (n, d, n, d): sum over rows of
    m sigma'(x'(theta_j - theta_i)) r r', r = (e_i - e_j) (x) x."""
    i, j, X, m = rows["i"], rows["j"], rows["X"], rows["m"]
    u = np.einsum("kd,kd->k", X, theta[j] - theta[i])
    w = m * expit(u) * expit(-u)
    outer = w[:, None, None] * X[:, :, None] * X[:, None, :]  # (K, d, d)
    J = np.zeros((n, n, d, d))
    np.add.at(J, (i, i), outer)
    np.add.at(J, (j, j), outer)
    np.add.at(J, (i, j), -outer)
    np.add.at(J, (j, i), -outer)
    return J.transpose(0, 2, 1, 3)


@lru_cache(maxsize=16)
def sum_zero_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n, n-1) of the sum-zero vectors."""
    q, _ = np.linalg.qr(np.eye(n)[:, 1:] - 1.0 / n)
    q.flags.writeable = False
    return q


def pseudo_inverse(J) -> np.ndarray | None:
    """J^+ on the sum-zero space, (n, d, n, d): C (C'JC)^{-1} C', C = Q (x) I_d; None when C'JC is
    (numerically) singular: the told votes do not identify theta."""
    n, d = J.shape[:2]
    C = np.kron(sum_zero_basis(n), np.eye(d))
    reduced = C.T @ J.reshape(n * d, n * d) @ C
    try:
        L = np.linalg.cholesky(reduced)
    except np.linalg.LinAlgError:
        return None
    diagonal = np.diag(L) ** 2
    if not np.all(np.isfinite(diagonal)) or diagonal.min() < 1e-12 * diagonal.max():
        return None
    half = solve_triangular(L, C.T, lower=True)  # L^{-1} C'
    return (half.T @ half).reshape(n, d, n, d)


class _Information:
    """J^+ at the look's theta, grown by each chosen pair between looks (Sherman-Morrison)."""

    def __init__(self, episode):
        self.edges = episode.edges
        self.n, self.d, self.M = episode.n_items, episode.dim, episode.M
        self.theta = None
        self.P = None  # (n, d, n, d)

    def look(self, view):
        self.theta = view.theta
        self.P = None if view.theta is None else pseudo_inverse(information(view.theta, view.rows, self.n, self.d))

    def weights(self, x) -> np.ndarray:
        """w_ab = M sigma'(x'(theta_b - theta_a)) for every allowed pair."""
        u = self.theta[self.edges[:, 1]] @ x - self.theta[self.edges[:, 0]] @ x
        return self.M * expit(u) * expit(-u)

    def quadratic(self, x) -> np.ndarray:
        """(n, n): x'P[i, :, j, :]x."""
        return self.P[:, 0, :, 0] if self.d == 1 else np.einsum("iajb,a,b->ij", self.P, x, x)

    def pair_variance(self, x) -> np.ndarray:
        """r'P r for every allowed pair at context x."""
        Q = self.quadratic(x)
        a, b = self.edges[:, 0], self.edges[:, 1]
        return Q[a, a] + Q[b, b] - 2.0 * Q[a, b]

    def update(self, step, choice, wins):
        if self.P is None:
            return
        a, b, x = choice.major, choice.other, np.asarray(step.x, dtype=float)
        u = float(x @ (self.theta[b] - self.theta[a]))
        w = self.M * expit(u) * expit(-u)
        v = self.P[:, :, a, :] @ x - self.P[:, :, b, :] @ x  # P r, (n, d)
        s = float((v[a] - v[b]) @ x)  # r'P r
        self.P = self.P - (w / (1.0 + w * s)) * np.einsum("ia,jb->iajb", v, v)


class Fisher(_Information):
    """``fisher``: the D-optimal next pair (module docstring)."""

    def scores(self, x) -> np.ndarray:
        """w_ab r'J^+ r for every allowed pair (the determinant lemma's factor, minus one)."""
        return self.weights(x) * self.pair_variance(x)

    def select(self, step):
        if self.P is None:
            return random_edge(step)
        e = int(np.argmax(self.scores(np.asarray(step.x, dtype=float))))  # first maximiser
        return Choice(int(self.edges[e, 0]), int(self.edges[e, 1]), False)


class LUCB(_Information):
    """``lucb``: the leader against its most ambiguous challenger (module docstring)."""

    def __init__(self, episode):
        super().__init__(episode)
        self.scores_d = None
        self.undecided = ()
        self.contexts = episode.decision_contexts
        self.factor = None

    def look(self, view):
        super().look(view)
        result = view.result
        ok = self.P is not None and result is not None and result.available and view.undecided
        self.scores_d = np.asarray(result.theta_d) @ self.contexts.T if ok else None  # (n, C)
        self.undecided = tuple(view.undecided)
        if ok:
            C = len(self.contexts)
            self.factor = {k: float(cs_factor(max(view.votes, 1), view.tightest_at,
                                              1.0 - (1.0 - view.level) / (C * k * (self.n - k))))
                           for k in self.undecided}

    def targets(self) -> dict:
        """{k: (context index, i, j)}: for every undecided k, the pair of S_k x (not S_k) with the
        smallest standardised lower bound (module docstring)."""
        out = {}
        for k in self.undecided:
            worst = None
            for c, xc in enumerate(self.contexts):
                s = self.scores_d[:, c]
                order = np.argsort(-s, kind="stable")
                inside, outside = order[:k], order[k:]
                Q = self.quadratic(xc)
                ii, jj = np.repeat(inside, len(outside)), np.tile(outside, len(inside))
                sd = np.sqrt(np.maximum(Q[ii, ii] + Q[jj, jj] - 2.0 * Q[ii, jj], 1e-300))
                z = (s[ii] - s[jj]) / sd - self.factor[k]
                p = int(np.argmin(z))
                if worst is None or z[p] < worst[0]:
                    worst = (z[p], c, int(ii[p]), int(jj[p]))
            out[k] = worst[1:]
        return out

    def contrast_variance(self, c, i, j) -> float:
        """g'J^+ g for g = (e_i - e_j) (x) x_c."""
        Q = self.quadratic(self.contexts[c])
        return float(Q[i, i] + Q[j, j] - 2.0 * Q[i, j])

    def reductions(self, x, c, i, j) -> np.ndarray:
        """For every allowed pair, how much one step on it at context x reduces Var of the contrast
        g = (e_i - e_j) (x) x_c: w (g'P r)^2 / (1 + w r'P r)."""
        xc = self.contexts[c]
        u = (self.P[:, :, i, :] @ xc - self.P[:, :, j, :] @ xc) @ x  # (P g)_item . x, (n,)
        a, b = self.edges[:, 0], self.edges[:, 1]
        gpr = u[a] - u[b]
        w = self.weights(x)
        return w * gpr * gpr / (1.0 + w * self.pair_variance(x))

    def criterion(self, x) -> np.ndarray:
        """For every allowed pair, the summed relative variance reductions of the undecided k's
        most ambiguous contrasts (module docstring)."""
        total = np.zeros(len(self.edges))
        for c, i, j in self.targets().values():
            total += self.reductions(x, c, i, j) / max(self.contrast_variance(c, i, j), 1e-300)
        return total

    def select(self, step):
        if self.scores_d is None:
            return random_edge(step)
        e = int(np.argmax(self.criterion(np.asarray(step.x, dtype=float))))
        return Choice(int(self.edges[e, 0]), int(self.edges[e, 1]), False)


FACTORIES = {"uniform": Uniform, "arena_active": ArenaActive, "fisher": Fisher, "lucb": LUCB}

