"""The arenas of the votes-to-a-decision study: environments whose votes are replayed or simulated,
each with its truth, its decision context(s) and its votes per step M.

Every arena builds, for one replication seed, an :class:`Episode`: the items, the allowed pairs
(``edges``, lo < hi), the truth theta* (n, d), theta(0) (n, d, what a greedy policy starts from),
the context of every step (``context_ids`` into ``context_table``), the decision contexts and
``draw(t, a, b)``, the M votes of step t on the pair {a, b}.

Arenas (:data:`ARENAS`, in table order)
---------------------------------------
``arena10``, ``arena30``, ``arena129``
    The replayed Chatbot Arena (:func:`study.llm.data.load_arena`: leaderbot's 1.67M votes on 129
    models, 3,460 played pairs): the 10 and 30 models with the most recorded votes (ties broken by
    index; their played pairs connect them: all 45 pairs of the 10, 398 of the 435 pairs of the 30)
    and all 129.  A vote on a pair is drawn, with replacement, from that pair's recorded votes
    (:class:`study.llm.environment.JudgmentReplay`): first wins, second wins, or a tie of either
    kind (half a win each side).  Never-played pairs are not allowed.  d = 1, x = 1; M = 10 votes a
    step (as :class:`study.llm.environment.ArenaReplay`).  The truth is the BT MLE on the arena's
    recorded votes (all 1.67M for 129 models, the subset's pairs' votes for 10 and 30).  The
    replay is *not* exactly BTL (each pair's outcome rates are its own), so the "truth" is the
    best BT fit: a decision's error is measured against it.  Standard errors: the sandwich (ties
    are not Bernoulli draws).
``arena30-btl``
    The well-specified twin of ``arena30``: the same models, pairs and truth, but every vote drawn
    from the fitted BTL (P(hi beats lo) = sigma(theta*_hi - theta*_lo), no ties), so that the
    error paid can be told from misspecification.  Model-based standard errors.
``llm``
    The project's LLM application (:class:`study.llm.environment.LLMReplay`): five LLMs on the 100
    MMLU anatomy questions (10-d contexts), judgments from the committed generated pool, one
    judgment a step (M = 1, as LLMReplay); step t's question drawn uniformly.  Truth: the pool's BT
    MLE (``theta_star``).  Decision context: the mean of the 100 question contexts (where the truth
    ranks GPT-4o mini > GPT-3.5 > LLaMA-2 > Alpaca > LLaMA-1).
``categories``
    Simulated categories where the best model differs by category: 8 models, 4 categories,
    contexts x_c = e_c + 0.25 (one-hot plus a shared part; d = 4), theta*_ic = g_i + 0.8 [i = c]
    (centred over items) with g = (0.5, 0.4, 0.3, 0.2, 0, -0.2, -0.5, -0.7).  The true scores
    x_c'theta*_i (models by row, categories by column) are

        1.8 1.0 1.0 1.0 / 0.8 1.6 0.8 0.8 / 0.6 0.6 1.4 0.6 / 0.4 0.4 0.4 1.2 /
        -0.2 ... / -0.6 ... / -1.2 ... / -1.6 ... (the same in every category),

    so model c is best in category c (leads of 1.0, 0.6, 0.4, 0.2), and the top 3 are {0, 1, 2},
    {0, 1, 2}, {0, 1, 2}, {0, 1, 3} (boundary gaps 0.2, 0.2, 0.4, 0.2).  All 28 pairs allowed;
    step t's category drawn uniformly; M = 10 BTL votes a step.  Decision contexts: every
    category's x_c, the level split by Bonferroni over the 4 (each at 1 - 0.05 / 4); decided when
    all four are; wrong when any category's set is.
``A``, ``B``
    The paper's Settings A (5 items, d = 10, M = 20) and B (10 items, d = 10, M = 50): the
    setting's G(n, p) graph, truth, theta(0) and N(1, 0.5 I) contexts (one per step), drawn per
    replication (:class:`study.simulation.environment.BTLEnvironment`), BTL votes.  At the mean
    context every item ties in the truth, so the decision context is the replication's first
    context x_1 (a random prompt: a strict leader at a random gap; shared by every method).

Common random numbers: the outcome uniforms (one per vote index), the context sequence, theta(0)
and the policy seed come from the replication seed only, so every method sees the same vote
behind the same (pair, vote index): a vote's outcome does not depend on which end is the major
item.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import expit

ARENAS = {
    "arena10": "Chatbot Arena replay, the 10 most-voted models (45 pairs), x = 1, M = 10",
    "arena30": "Chatbot Arena replay, the 30 most-voted models (398 played pairs), x = 1, M = 10",
    "arena30-btl": "arena30's pairs and BT-fit truth, votes drawn from the fitted BTL (well specified)",
    "arena129": "Chatbot Arena replay, all 129 models (3,460 played pairs), x = 1, M = 10",
    "llm": "five LLMs on 100 MMLU questions (generated judgments), d = 10, M = 1, decided at the mean question",
    "categories": "8 models, 4 categories with different leaders (BTL), d = 4, M = 10, decided in every category",
    "A": "the paper's Setting A (5 items, d = 10, M = 20), decided at the first context",
    "B": "the paper's Setting B (10 items, d = 10, M = 50), decided at the first context",
}
ARENA_M = 10
CATEGORY_GENERAL = (0.5, 0.4, 0.3, 0.2, 0.0, -0.2, -0.5, -0.7)
CATEGORY_BONUS = 0.8
N_CATEGORIES = 4
CATEGORY_SHARE = 0.25


def check_arena(name) -> str:
    """``name`` if it is an arena of :data:`ARENAS`; ``ValueError`` naming the allowed ones."""
    if not isinstance(name, str) or name not in ARENAS:
        raise ValueError(f"unknown arena {name!r}; allowed: {list(ARENAS)}")
    return name


@dataclass
class Episode:
    """One replication of an arena (module docstring): what the engine and the policies need."""

    name: str
    n_items: int
    dim: int
    M: int
    edges: np.ndarray  # (E, 2), lo < hi
    theta_star: np.ndarray  # (n, d), centred
    theta0: np.ndarray  # (n, d)
    context_table: np.ndarray  # (Q, d)
    context_ids: np.ndarray  # (steps,) into context_table
    decision_contexts: np.ndarray  # (C, d)
    policy_seed: np.random.SeedSequence
    se: str  # "model" or "sandwich"
    source: object  # what draws the votes: .draw(t, a, b) -> codes (M,): 0 = a won, 1 = b won, 2 = tie

    @property
    def contexts(self) -> np.ndarray:
        """(steps, d): the context of every step."""
        return self.context_table[self.context_ids]

    def draw(self, t: int, a: int, b: int) -> np.ndarray:
        return self.source.draw(t, a, b)

    def true_tops(self, k: int) -> list:
        """The true top-k set (a frozenset) at each decision context."""
        return [frozenset(np.argsort(-(self.theta_star @ x), kind="stable")[:k].tolist())
                for x in self.decision_contexts]


class BTLVotes:
    """Votes drawn from a (contextual) BTL model: the v-th vote of step t on {a, b} (lo < hi stored
    order) is a win of hi iff its uniform is below sigma(x_t'(theta_hi - theta_lo)), so the outcome
    of a vote does not depend on which end is the major item."""

    def __init__(self, theta, contexts, uniforms):
        self.theta, self.contexts, self.uniforms = theta, contexts, uniforms

    def draw(self, t: int, a: int, b: int) -> np.ndarray:
        lo, hi = (a, b) if a < b else (b, a)
        p_hi = expit(self.contexts[t - 1] @ (self.theta[hi] - self.theta[lo]))
        hi_won = self.uniforms[t - 1] < p_hi
        b_won = hi_won if b == hi else ~hi_won
        return b_won.astype(np.int64)  # 0 = a won, 1 = b won (no ties)


def _most_voted(n: int) -> np.ndarray:
    arena = _arena()
    votes = arena.counts.sum(axis=1)
    per_model = np.zeros(len(arena.models))
    np.add.at(per_model, arena.pairs[:, 0], votes)
    np.add.at(per_model, arena.pairs[:, 1], votes)
    return np.sort(np.argsort(-per_model, kind="stable")[:n])


@lru_cache(maxsize=1)
def _arena():
    from ..llm.data import load_arena
    return load_arena()


@lru_cache(maxsize=4)
def arena_subset(n: int):
    """(model indices, edges (E, 2) re-indexed, counts (E, 4), truth (n,)) of the ``n`` most-voted
    models; the truth is the BT MLE on their pairs' recorded votes (ties half a win), centred."""
    from ..core import fit_btl
    arena = _arena()
    if n == len(arena.models):
        return np.arange(n), arena.pairs, arena.counts, arena.theta_star
    models = _most_voted(n)
    index = -np.ones(len(arena.models), dtype=np.int64)
    index[models] = np.arange(n)
    keep = (index[arena.pairs[:, 0]] >= 0) & (index[arena.pairs[:, 1]] >= 0)
    edges = index[arena.pairs[keep]]
    counts = arena.counts[keep]
    c = counts
    theta = fit_btl(edges[:, 0], edges[:, 1], np.ones((len(c), 1)), c[:, 1].astype(float),
                    c.sum(axis=1).astype(float), n, ties=(c[:, 2] + c[:, 3]).astype(float))[:, 0]
    return models, edges, counts, theta - theta.mean()


def _replay_episode(name, n, seed, steps) -> Episode:
    from ..llm.environment import JudgmentReplay
    models, edges, c, theta = arena_subset(n)
    counts = np.stack([c[:, 0], c[:, 1], c[:, 2] + c[:, 3]], axis=1)[None]  # (1, E, 3)
    replay = JudgmentReplay(np.ones((1, 1)), edges, counts, theta[:, None], seed, T=steps, M=ARENA_M)
    return Episode(name, n, 1, ARENA_M, replay.edges, replay.theta_star, replay.theta0, np.ones((1, 1)),
                   replay.questions, np.ones((1, 1)), replay.policy_seed, "sandwich", replay)


def _btl_twin(seed, steps) -> Episode:
    # the same seed children as JudgmentReplay (questions, outcomes, theta(0), policy), so that the twin
    # shares the replay's outcome uniforms and theta(0)
    from ..simulation.seeds import seed_sequence
    models, edges, c, theta = arena_subset(30)
    _, outcome_ss, init_ss, policy_ss = seed_sequence(seed).spawn(4)
    uniforms = np.random.default_rng(outcome_ss).random((steps, ARENA_M))
    theta0 = np.sqrt(5.0) * np.random.default_rng(init_ss).standard_normal((30, 1))
    star = theta[:, None]
    source = BTLVotes(star, np.ones((steps, 1)), uniforms)
    return Episode("arena30-btl", 30, 1, ARENA_M, edges, star, theta0 - theta0.mean(axis=0), np.ones((1, 1)),
                   np.zeros(steps, dtype=np.int64), np.ones((1, 1)), policy_ss, "model", source)


def _llm_episode(seed, steps) -> Episode:
    from ..llm.environment import LLMReplay
    replay = LLMReplay(seed, T=steps)
    mean = replay.question_contexts.mean(axis=0)
    return Episode("llm", replay.n_items, replay.dim, replay.M, replay.edges, replay.theta_star, replay.theta0,
                   replay.question_contexts, replay.questions, mean[None, :], replay.policy_seed, "model", replay)


def category_truth() -> tuple:
    """(theta* (8, 4), category contexts (4, 4)) of the ``categories`` arena (module docstring)."""
    n, c = len(CATEGORY_GENERAL), N_CATEGORIES
    theta = np.tile(np.asarray(CATEGORY_GENERAL, dtype=float)[:, None], (1, c))
    theta[np.arange(c), np.arange(c)] += CATEGORY_BONUS
    contexts = np.eye(c) + CATEGORY_SHARE
    return theta - theta.mean(axis=0), contexts


def _categories_episode(seed, steps) -> Episode:
    from ..simulation.seeds import seed_sequence
    theta, table = category_truth()
    n = len(theta)
    context_ss, outcome_ss, init_ss, policy_ss = seed_sequence(seed).spawn(4)
    ids = np.random.default_rng(context_ss).integers(0, len(table), size=steps)
    uniforms = np.random.default_rng(outcome_ss).random((steps, ARENA_M))
    theta0 = np.sqrt(5.0) * np.random.default_rng(init_ss).standard_normal(theta.shape)
    edges = np.array([(a, b) for a in range(n) for b in range(a + 1, n)], dtype=np.int64)
    source = BTLVotes(theta, table[ids], uniforms)
    return Episode("categories", n, table.shape[1], ARENA_M, edges, theta, theta0 - theta0.mean(axis=0), table, ids,
                   table, policy_ss, "model", source)


def _setting_episode(name, seed, steps) -> Episode:
    from ..simulation.environment import BTLEnvironment
    from ..simulation.settings import SETTINGS
    setting = SETTINGS[name].replace(T=steps, T0=min(SETTINGS[name].T0, steps))
    env = BTLEnvironment(setting, seed)
    source = BTLVotes(env.theta_star, env.contexts, env._uniforms)
    return Episode(name, env.n_items, env.dim, env.M, np.asarray(env.edges, dtype=np.int64), env.theta_star,
                   env.theta0, env.contexts, np.arange(steps), env.contexts[:1].copy(), env.policy_seed, "model",
                   source)


def votes_per_step(arena: str) -> int:
    """M, the votes a step of ``arena`` draws on its one pair."""
    check_arena(arena)
    if arena == "llm":
        from ..llm.environment import LLM_M
        return LLM_M
    if arena in ("A", "B"):
        from ..simulation.settings import SETTINGS
        return SETTINGS[arena].M
    return ARENA_M


def n_items(arena: str) -> int:
    """n, the number of items (models) of ``arena``."""
    check_arena(arena)
    return {"arena10": 10, "arena30": 30, "arena30-btl": 30, "arena129": 129, "llm": 5,
            "categories": len(CATEGORY_GENERAL), "A": 5, "B": 10}[arena]


def build_episode(arena: str, seed: np.random.SeedSequence, steps: int) -> Episode:
    """The :class:`Episode` of ``arena`` for replication seed ``seed``, ``steps`` steps long."""
    check_arena(arena)
    if arena in ("arena10", "arena30", "arena129"):
        return _replay_episode(arena, int(arena[5:]), seed, steps)
    if arena == "arena30-btl":
        return _btl_twin(seed, steps)
    if arena == "llm":
        return _llm_episode(seed, steps)
    if arena == "categories":
        return _categories_episode(seed, steps)
    return _setting_episode(arena, seed, steps)
