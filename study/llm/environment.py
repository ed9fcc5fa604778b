"""Replay environments: outcomes are drawn from recorded (or, for the LLM pool, generated)
judgments instead of from a model.

Each class satisfies the environment protocol of :mod:`study.simulation.environment` (``n_items, dim, T, M,
edges, theta_star, theta0, contexts, compare(t, a, b)``, plus ``policy_seed`` and
``graph_draws``), so the core's ``run_environment`` runs them unchanged.

* :class:`JudgmentReplay` is the general engine.  Judgments are held as counts per
  (question, pair) of the three recorded outcomes (the pair's first model won, its second model
  won, tie).  Step t draws question ``q_t`` uniformly (``contexts[t-1]`` is its vector); then
  ``compare(t, a, b)`` draws M judgments uniformly *with replacement* from the recorded judgments of
  (q_t, {a, b}), so only recorded outcomes occur; b's wins are (#b won) + 0.5 (#ties) (a tie is half
  a win for each side; the core accepts non-integer wins).  If (q_t, {a, b}) has no judgment (possible
  only for a bring-your-own file), the pair's judgments on all questions are used instead and
  ``fallback_draws`` is incremented.
* :class:`LLMReplay`: the five LLMs on the 100 MMLU anatomy questions, judgments from the
  committed *generated* pool (:func:`study.llm.data.load_judgment_pool`).  M = 1 by default: one
  judgment per step, as one GPT-4 verdict on one question is one comparison in the paper's
  application (the paper does not state M); T = 5000 as in the paper.
* :class:`ArenaReplay`: the Chatbot Arena replay (d = 1, x = 1) over all 129 models, the graph
  = the 3,460 pairs with votes, outcomes drawn from that pair's recorded votes (ties of both kinds
  as half a win each), theta* = the BT MLE on all 1.67M votes (cached in ``arena.npz``).

Randomness (no global RNG): the seed (int or ``np.random.SeedSequence``) spawns four children:
the question sequence, the outcome uniforms (T x M, drawn up front: common random numbers, so
every method sees the same questions and the same uniform behind each judgment), theta(0) ~
N(0, 5) entries (variance 5, then centred over items as the core does), and ``policy_seed``.
"""
from __future__ import annotations

import numpy as np

from ..core import _validate as check
from ..simulation.graph import is_connected
from ..simulation.seeds import seed_sequence
from .data import load_arena, load_judgment_pool

__all__ = ["JudgmentReplay", "LLMReplay", "ArenaReplay", "LLM_T", "LLM_M", "ARENA_T", "ARENA_M", "INIT_VAR"]

LLM_T = 5000
LLM_M = 1
ARENA_T = 10_000
ARENA_M = 10
INIT_VAR = 5.0


class JudgmentReplay:
    """Replay of recorded judgments (see the module docstring).

    Parameters
    ----------
    question_contexts : (Q, d) array, one context vector per question.
    edges : (E, 2) int array of compared pairs with ``edges[e, 0] < edges[e, 1]``; must be connected.
    counts : (Q, E, 3) non-negative counts of (first won, second won, tie) per (question, pair).
    theta_star : (n, d) evaluation truth (centred here).
    seed : int or SeedSequence.  T, M : steps and judgments per step.
    models : optional item names; question_ids : optional question names.
    """

    def __init__(self, question_contexts, edges, counts, theta_star, seed, *, T: int, M: int = 1,
                 models=None, question_ids=None, question_weights=None):
        self.T = check.integer("T", T, low=1)
        self.M = check.integer("M", M, low=1)
        X = np.asarray(question_contexts, dtype=float)
        if X.ndim != 2 or not np.all(np.isfinite(X)):
            raise ValueError(f"question_contexts must be a finite (Q, d) array, got shape {X.shape}")
        theta_star = np.asarray(theta_star, dtype=float)
        n, d = theta_star.shape
        if X.shape[1] != d:
            raise ValueError(f"contexts have d={X.shape[1]} but theta_star has d={d}")
        edges = np.asarray(edges, dtype=np.int64)
        if edges.ndim != 2 or edges.shape[1] != 2 or len(edges) == 0:
            raise ValueError(f"edges must be a non-empty (E, 2) array, got shape {edges.shape}")
        if not np.all((edges[:, 0] < edges[:, 1]) & (edges[:, 0] >= 0) & (edges[:, 1] < n)):
            raise ValueError("edges must hold index pairs a < b within [0, n_items)")
        if not is_connected(edges, n):
            raise ValueError("the comparison graph (pairs with judgments) is not connected")
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (X.shape[0], len(edges), 3) or np.any(counts < 0):
            raise ValueError(f"counts must be a non-negative ({X.shape[0]}, {len(edges)}, 3) array, got {counts.shape}")
        pair_counts = counts.sum(axis=0)
        if np.any(pair_counts.sum(axis=1) == 0):
            raise ValueError("every edge needs at least one recorded judgment")

        self.n_items, self.dim = n, d
        self.edges = edges
        self.theta_star = theta_star - theta_star.mean(axis=0)
        self.models = list(models) if models is not None else [str(k) for k in range(n)]
        self.question_ids = list(question_ids) if question_ids is not None else list(range(X.shape[0]))
        self.question_contexts = X
        self.graph_draws = 0
        self.fallback_draws = 0
        self._edge_index = {(int(a), int(b)): e for e, (a, b) in enumerate(edges)}
        self._cum = np.cumsum(counts, axis=2)  # (Q, E, 3)
        self._pair_cum = np.cumsum(pair_counts, axis=1)  # (E, 3)

        question_ss, outcome_ss, init_ss, self.policy_seed = seed_sequence(seed).spawn(4)
        Q = X.shape[0]
        if question_weights is None:
            self.questions = np.random.default_rng(question_ss).integers(0, Q, size=self.T)
        else:
            w = np.asarray(question_weights, dtype=float)
            self.questions = np.random.default_rng(question_ss).choice(Q, size=self.T, p=w / w.sum())
        self.contexts = X[self.questions]
        self._uniforms = np.random.default_rng(outcome_ss).random((self.T, self.M))
        theta0 = np.sqrt(INIT_VAR) * np.random.default_rng(init_ss).standard_normal((n, d))
        self.theta0 = theta0 - theta0.mean(axis=0)

    # values of the three recorded outcomes for the pair's second model: first won, second won, tie
    _SECOND_WINS = np.array([0.0, 1.0, 0.5])

    def draw(self, t: int, a: int, b: int) -> np.ndarray:
        """The M recorded outcomes drawn at step t for the pair {a, b}: codes 0 = a won, 1 = b won,
        2 = tie (codes from a's and b's point of view, whatever the pair's stored order)."""
        if not (1 <= t <= self.T):
            raise ValueError(f"t must lie in [1, {self.T}], got {t}")
        a, b = int(a), int(b)
        lo, hi = (a, b) if a < b else (b, a)
        e = self._edge_index.get((lo, hi))
        if e is None:
            raise ValueError(f"items {a} and {b} are not an edge of the comparison graph (no judgments)")
        cum = self._cum[self.questions[t - 1], e]
        if cum[-1] == 0:
            self.fallback_draws += 1
            cum = self._pair_cum[e]
        r = np.floor(self._uniforms[t - 1] * cum[-1])
        codes = np.searchsorted(cum, r, side="right")  # 0 = first (lo) won, 1 = second (hi) won, 2 = tie
        if a > b:  # a is the stored second model: swap the win codes
            codes = np.where(codes == 2, 2, 1 - codes)
        return codes

    def compare(self, t: int, a: int, b: int) -> float:
        """How many of the M judgments at step t (1-based) item b wins against a (ties count 1/2)."""
        codes = self.draw(t, a, b)
        return float(np.sum(self._SECOND_WINS[codes]))

    def regret_oracle(self) -> np.ndarray:
        """Best true score per step, max_i X_t' theta*_i (for checks)."""
        return (self.contexts @ self.theta_star.T).max(axis=1)


class LLMReplay(JudgmentReplay):
    """The five LLMs on the 100 MMLU anatomy questions; judgments from the committed generated pool."""

    def __init__(self, seed, T: int = LLM_T, M: int = LLM_M):
        pool = load_judgment_pool()
        counts = pool.counts()
        super().__init__(pool.contexts, pool.pairs, counts, pool.theta_star, seed, T=T, M=M,
                         models=pool.models, question_ids=pool.question_ids)
        self.labels = pool.labels
        self.theta_gen = pool.theta_gen


class ArenaReplay(JudgmentReplay):
    """Chatbot Arena replay: 129 models, d = 1, x = 1, outcomes drawn from each pair's recorded votes.

    Default T = 10,000 steps of M = 10 votes (100,000 votes, 6% of the recorded 1.67M), with
    T0 = 4,000 (see :mod:`study.llm.runs`).  With the paper's alpha = 1/4 an exploration stage of
    T0 steps explores about (4/3) T0^(3/4) ~ 670 random edges (~100 votes per model), and the
    policies separate only once the post-T0 stage is long: in a pilot (3 seeds, our own d = 1
    Newton fit, same policies) the average regret R(t) of RB / ERA / ETA was 0.166 / 0.192 / 0.020
    at t = 5,000 and 0.083 / 0.152 / 0.010 at t = 10,000 (with one fixed context and 10 votes a
    step, pure greedy finds the leader fast and every exploration step costs ~1.2; the estimation
    error of the other 128 models is where exploration pays).  The core needs ~7.5 ms per step at n = 129 (measured,
    2 cores, loaded machine), i.e. ~75 s per replication at T = 10,000.
    """

    def __init__(self, seed, T: int = ARENA_T, M: int = ARENA_M):
        arena = load_arena()
        c = arena.counts
        counts = np.stack([c[:, 0], c[:, 1], c[:, 2] + c[:, 3]], axis=1)[None]  # (1, E, 3)
        super().__init__(np.ones((1, 1)), arena.pairs, counts, arena.theta_star[:, None], seed, T=T, M=M,
                         models=arena.models, question_ids=["arena"])
        self.labels = list(arena.models)
