"""The replay engine: one method on one arena until every top-k is decided or the budget is spent.

Each step the method (a rule of :mod:`.rules` or a registered policy of :mod:`study.policies`,
through the policy protocol) picks one allowed pair at the step's context; the arena draws its M
votes (:mod:`.arenas`); the votes are added to the counts, aggregated by (pair, context).

Looks.  The estimate is refreshed, and the stopping rule evaluated, only at the *looks*: one
geometric grid of told votes shared by every method of an arena and budget (:func:`look_steps`):
the first look at N_0 = 2 n d votes (rounded up to whole steps; the MLE may not exist yet, and a
look without one decides nothing), then every 5% more votes (N_{j+1} = 1.05 N_j, rounded up to
whole steps), plus the fixed-budget checkpoints (budget / 16, / 8, / 4, / 2, and the budget).  Why
not every step: at n = 129 a fit and a debiasing cost tens of milliseconds, and a run takes up to
tens of thousands of steps.  The same holds for what a policy sees: ``Step.theta`` and
``Step.debiased()`` are the last look's MLE and debiased estimate (theta(0) and "unavailable"
before the first MLE), the same schedule for every method.

At a look: the MLE on the aggregated counts (:func:`study.fit_btl`, ties half a win; none while
the data are separable), the debiased estimate at it (:func:`study.debias`, the arena's standard
errors: sandwich on the Chatbot Arena replays, model-based elsewhere), then, for each k still
undecided, :func:`study.core.stopping.separation` at every decision context with ``anytime=True``
(the confidence sequences), ``tightest_at`` = the budget (fixed before the run), at level
1 - (1 - level) / C for C decision contexts (Bonferroni; within a context the rule splits over the
k (n - k) pairs).  k is decided at its first look decided at every context; its set (per context)
is then frozen.  The run ends when every k is decided or the budget is reached.

Deterministic given the seed: the arena's draws (:mod:`.arenas`), the steps' four shared uniforms
(``default_rng(policy_seed)``, as :mod:`study.simulation.replication`) and the policy's private
generator (:func:`study.simulation.seeds.policy_generator`) all derive from it.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core import debias, fit_btl
from ..core.inference import DebiasResult
from ..core.stopping import separation
from ..core.threads import one_blas_thread
from ..policies import Choice, Step, make_policy, resolve_policy
from ..simulation.graph import ComparisonGraph
from ..simulation.replication import read_only_result
from ..simulation.seeds import policy_generator
from ..simulation.settings import SETTINGS, Setting
from .arenas import build_episode, check_arena, votes_per_step
from .rules import FACTORIES, LookView

TOPS = (1, 3, 10)
LEVEL = 0.95
GROWTH = 1.05
FIRST_LOOK_PER_PARAMETER = 2
CHECKPOINT_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
# the registered policies of study.policies the study runs (their registry names); the rules of .rules first
POLICIES = ("RB", "ETA", "MaxPairUCB", "BT-UCB1", "MaxInP")
METHODS = tuple(FACTORIES) + POLICIES


def check_method(name) -> str:
    """``name`` if it is a method of :data:`METHODS`; ``ValueError`` naming the allowed ones."""
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"unknown method {name!r}; allowed: {list(METHODS)}")
    return name


@dataclass(frozen=True)
class VotesRun:
    """One replay (:func:`replay`).

    Attributes
    ----------
    arena, method : str
    n_items, budget : int
    votes_told : int
        Votes drawn when the run ended.
    looks : int
        Looks at which the rule was evaluated.
    cpu_seconds : float
        ``time.process_time()`` spent in :func:`replay`.
    decisions : DataFrame
        One row per k < n_items of ``tops``: ``top``, ``decided``, ``votes`` (told at the first
        decided look; the budget if undecided), ``wrong`` (declared set != true top-k set at some
        decision context; False if undecided), ``declared`` (sorted item indices "3,7,12", the
        contexts' sets joined by ";"; "" if undecided), ``looks`` (looks up to the decision).
    fixed_budget : DataFrame
        One row per (checkpoint N, k): ``votes`` (= N), ``top``, ``right`` (the set held at N -- the
        declared one if k was decided by N, else the current debiased estimate's top k -- equals
        the true top-k set at every decision context; False while there is no estimate),
        ``decided`` (by N).
    """

    arena: str
    method: str
    n_items: int
    budget: int
    votes_told: int
    looks: int
    cpu_seconds: float
    decisions: pd.DataFrame
    fixed_budget: pd.DataFrame


def look_steps(n: int, d: int, M: int, budget: int) -> tuple:
    """(look steps, checkpoint steps): the steps after which the engine looks (module docstring)."""
    steps = budget // M
    first = FIRST_LOOK_PER_PARAMETER * n * d
    grid, votes = set(), float(first)
    while votes < budget:
        grid.add(min(steps, max(1, math.ceil(votes / M))))
        votes *= GROWTH
    checkpoints = tuple(sorted({min(steps, max(1, round(budget * f / M))) for f in CHECKPOINT_FRACTIONS}))
    return tuple(sorted(grid | set(checkpoints) | {steps})), checkpoints


class _Memo(DebiasResult):
    """A debiased result whose ``spread``/``pair_spread`` are remembered per (x, pairs): between
    looks a policy asks the same question at every step of a fixed-context arena."""

    def spread(self, x):
        key = ("memo_spread", np.asarray(x, dtype=float).tobytes())
        if key not in self._cache:
            self._cache[key] = DebiasResult.spread(self, x)
        return self._cache[key]

    def pair_spread(self, x, pairs):
        pairs = np.asarray(pairs, dtype=np.intp)
        key = ("memo_pairs", np.asarray(x, dtype=float).tobytes(), pairs.tobytes())
        if key not in self._cache:
            self._cache[key] = DebiasResult.pair_spread(self, x, pairs)
        return self._cache[key]


def _memo(result: DebiasResult) -> _Memo:
    return _Memo(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})


def policy_setting(episode, steps: int) -> Setting:
    """The Setting a registered policy is built from: the arena's n, d, M, pairs and horizon (T =
    the budget's steps, T0 = 0.4 T, the paper's ratio); the paper's alpha and warm-up rules.  The
    truth field is zeros: a policy never sees it (it gets the public view)."""
    n, d = episode.n_items, episode.dim
    base = SETTINGS[episode.name] if episode.name in SETTINGS else None
    fields = dict(n_items=n, dim=d, T=steps, T0=int(round(0.4 * steps)), M=episode.M, edges=episode.edges,
                  truth=np.zeros((n, d)), init_mean=0.0)
    if base is not None:
        return base.replace(**fields)
    return Setting(name=episode.name, **fields)


class Replay:
    """The state of one replay, advanced step by step (:func:`replay` runs it to the end)."""

    def __init__(self, arena, method, seed, *, budget, tops=TOPS, level=LEVEL, anytime: bool = True):
        self.arena, self.method = check_arena(arena), check_method(method)
        self.anytime = bool(anytime)  # False: fixed-time CIs at every look (invalid; the tests' contrast)
        if not isinstance(seed, (np.random.SeedSequence, int)) or isinstance(seed, bool):
            raise ValueError(f"seed must be a numpy SeedSequence or a non-negative int, got {seed!r}")
        if isinstance(seed, int):
            if seed < 0:
                raise ValueError(f"seed must be a numpy SeedSequence or a non-negative int, got {seed!r}")
            seed = np.random.SeedSequence(seed)
        # a fresh copy: spawn() counts its children on the object, so a SeedSequence handed to several
        # replays would otherwise give each a different stream (and break common random numbers)
        seed = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
        M = votes_per_step(arena)
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < M or budget % M:
            raise ValueError(f"budget must be a positive multiple of M = {M}, the votes per step of arena "
                             f"{arena!r}; got {budget!r}")
        self.budget = int(budget)
        if not (isinstance(level, float) and 0.0 < level < 1.0):
            raise ValueError(f"level must be a float in (0, 1), got {level!r}")
        tops = tuple(tops)
        if not tops or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in tops):
            raise ValueError(f"tops must be positive integers, got {tops!r}")
        self.level = level
        self.steps = self.budget // M
        self.episode = ep = build_episode(arena, seed, self.steps)
        self.tops = tuple(sorted({int(k) for k in tops if k < ep.n_items}))
        self.look_at, self.checkpoints = look_steps(ep.n_items, ep.dim, M, self.budget)
        self._look_set = set(self.look_at)
        self.graph = ComparisonGraph.from_edges(ep.edges, ep.n_items)
        self.policy_graph = ComparisonGraph.from_edges(ep.edges, ep.n_items)
        self.setting = policy_setting(ep, self.steps)
        self.public = self.setting.public()
        if method in FACTORIES:
            self.policy = FACTORIES[method](ep)
        else:
            self.policy = make_policy(method, self.public, resolve_policy(method))
        self.uniforms = np.random.default_rng(ep.policy_seed).random((self.steps, 4))
        self.rng = policy_generator(ep.policy_seed, method)
        self.edge_index = {(int(a), int(b)): e for e, (a, b) in enumerate(ep.edges)}
        self.counts = np.zeros((len(ep.context_table), len(ep.edges), 3))  # lo won, hi won, tie
        self.t = 0
        self.theta = ep.theta0.copy()
        self.result = None
        self._policy_result = None
        self.looks = 0
        self.truth = {k: ep.true_tops(k) for k in self.tops}
        self.decided = {}  # k -> (votes, declared sets, looks)
        self.held = {}  # checkpoint votes -> {k: right}

    # ---------------------------------------------------------------------------------------
    def _debiased_for_policy(self):
        if self._policy_result is None:
            n, d = self.episode.n_items, self.episode.dim
            base = self.result if self.result is not None else DebiasResult(
                theta_d=np.full((n, d), np.nan), available=False, condition=np.inf)
            self._policy_result = read_only_result(_memo(base))
        return self._policy_result

    def step(self) -> None:
        """Advance one step: the method's pair, its M votes, the counts."""
        ep = self.episode
        t = self.t + 1
        x = ep.context_table[ep.context_ids[t - 1]]
        step = Step(t, x, self.uniforms[t - 1], self.policy_graph, self.theta, self._debiased_for_policy,
                    rng=self.rng, setting=self.public)
        choice = self.policy.select(step)
        a, b = int(choice[0]), int(choice[1])
        if a == b or not (0 <= a < ep.n_items and 0 <= b < ep.n_items) or not self.graph.adjacency[a, b]:
            raise ValueError(f"method {self.method!r} at step {t} chose ({a}, {b}), not an allowed pair of arena "
                             f"{self.arena!r}")
        codes = ep.draw(t, a, b)
        b_won = int(np.count_nonzero(codes == 1))
        ties = int(np.count_nonzero(codes == 2))
        a_won = len(codes) - b_won - ties
        lo_won, hi_won = (a_won, b_won) if a < b else (b_won, a_won)
        e = self.edge_index[(min(a, b), max(a, b))]
        self.counts[ep.context_ids[t - 1], e] += (lo_won, hi_won, ties)
        update = getattr(self.policy, "update", None)
        if update is not None:
            update(step, Choice(a, b, bool(choice[2])), b_won + 0.5 * ties)
        self.t = t

    def rows(self) -> dict:
        """The told votes aggregated by (pair, context), as :func:`study.fit_btl` takes them."""
        ep = self.episode
        q, e = np.nonzero(self.counts.sum(axis=2))
        c = self.counts[q, e]
        return {"i": ep.edges[e, 0], "j": ep.edges[e, 1], "X": ep.context_table[q], "wins": c[:, 1],
                "ties": c[:, 2], "m": c.sum(axis=1)}

    def votes(self) -> int:
        return self.t * self.episode.M

    def estimate(self):
        """(MLE theta or None, debiased result or None) on the told votes."""
        return estimate(self.rows(), self.episode.n_items, self.episode.se)

    def verdicts(self, result, k: int) -> list:
        """The stopping rule's verdict at every decision context (:func:`study.core.stopping.separation`)."""
        contexts = self.episode.decision_contexts
        level = 1.0 - (1.0 - self.level) / len(contexts)
        return [separation(result, x, top=k, level=level, anytime=self.anytime, tightest_at=float(self.budget))
                for x in contexts]

    def look(self) -> None:
        """Refit, debias, evaluate the rule for every undecided k, tell the method."""
        self.looks += 1
        rows = self.rows()
        theta, result = estimate(rows, self.episode.n_items, self.episode.se)
        if theta is not None:
            self.theta = theta
        self.result = result
        self._policy_result = None
        votes = self.votes()
        if result is not None and result.available:
            for k in self.tops:
                if k in self.decided:
                    continue
                verdicts = self.verdicts(result, k)
                if all(v.decided for v in verdicts):
                    self.decided[k] = (votes, [frozenset(v.top) for v in verdicts], self.looks)
        if self.t in self.checkpoints:
            self.held[votes] = {k: self._right_now(k) for k in self.tops}
        look = getattr(self.policy, "look", None)
        if look is not None:
            look(LookView(votes, theta, result, rows, tuple(k for k in self.tops if k not in self.decided),
                          self.episode.decision_contexts, self.level, float(self.budget)))

    def _right_now(self, k: int) -> bool:
        if k in self.decided:
            return self.decided[k][1] == self.truth[k]
        if self.result is None or not self.result.available:
            return False
        held = [frozenset(np.argsort(-(self.result.theta_d @ x), kind="stable")[:k].tolist())
                for x in self.episode.decision_contexts]
        return held == self.truth[k]

    def done(self) -> bool:
        return self.t >= self.steps or len(self.decided) == len(self.tops)

    def run(self) -> None:
        """Step and look until :meth:`done` (BLAS limited to one thread by the caller, as
        :func:`replay` does: the matrices are small)."""
        while not self.done():
            self.step()
            if self.t in self._look_set:
                self.look()

    def frames(self) -> tuple:
        """(decisions, fixed_budget) DataFrames of the contract (:class:`VotesRun`)."""
        rows = []
        for k in self.tops:
            if k in self.decided:
                votes, sets, looks = self.decided[k]
                declared = ";".join(",".join(str(i) for i in sorted(s)) for s in sets)
                rows.append((k, True, votes, sets != self.truth[k], declared, looks))
            else:
                rows.append((k, False, self.budget, False, "", self.looks))
        decisions = pd.DataFrame(rows, columns=["top", "decided", "votes", "wrong", "declared", "looks"]).astype(
            {"top": "int64", "decided": bool, "votes": "int64", "wrong": bool, "declared": str, "looks": "int64"})
        fixed = []
        for step in self.checkpoints:
            votes = step * self.episode.M
            for k in self.tops:
                if votes in self.held:
                    right = self.held[votes][k]
                    decided = k in self.decided and self.decided[k][0] <= votes
                else:  # the run ended (every k decided) before this checkpoint: the declared sets
                    right = self.decided[k][1] == self.truth[k]
                    decided = True
                fixed.append((votes, k, bool(right), bool(decided)))
        fixed_budget = pd.DataFrame(fixed, columns=["votes", "top", "right", "decided"]).astype(
            {"votes": "int64", "top": "int64", "right": bool, "decided": bool})
        return decisions, fixed_budget


def estimate(rows: dict, n: int, se: str):
    """(MLE theta, debiased result) on aggregated rows; (None, None) while the MLE does not exist
    (separable or unidentified data)."""
    if len(rows["m"]) == 0:
        return None, None
    args = (rows["i"], rows["j"], rows["X"], rows["wins"], rows["m"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a not-quite-converged fit is still an estimate
        try:
            theta = fit_btl(*args, n, ties=rows["ties"])
        except (ValueError, np.linalg.LinAlgError):
            return None, None
        if not np.all(np.isfinite(theta)):
            return None, None
        result = debias(theta, *args, ties=rows["ties"], se=se)
    return theta, result


def replay(arena: str, method: str, seed, *, budget: int, tops=TOPS, level: float = LEVEL) -> VotesRun:
    """Replay ``method`` on ``arena`` until every top-k of ``tops`` is decided or ``budget`` votes.

    Parameters
    ----------
    arena : str
        A name of :data:`study.votes.ARENAS`.
    method : str
        A name of :data:`study.votes.METHODS`.
    seed : numpy.random.SeedSequence or int
        The replication's seed: the same seed gives every method the same votes behind the same
        (pair, vote index), contexts, theta(0) and step uniforms (common random numbers).
    budget : int
        The vote cap, a multiple of the arena's votes per step M.
    tops : iterable of int
        The k of the top-k decisions (those >= the arena's n are dropped).
    level : float
        The stopping rule's level: P(a wrong declared set) <= 1 - level, asymptotically.

    Returns
    -------
    VotesRun

    Raises
    ------
    ValueError
        An unknown arena or method (naming the allowed values), a bad budget, tops or level.

    Examples
    --------
    >>> import numpy as np
    >>> from study.votes import replay
    >>> run = replay("llm", "lucb", np.random.SeedSequence(1), budget=600)
    >>> run.decisions.columns.tolist()[:5]
    ['top', 'decided', 'votes', 'wrong', 'declared']
    >>> run.decisions.top.tolist()
    [1, 3]
    """
    started = time.process_time()
    with one_blas_thread():
        run = Replay(arena, method, seed, budget=budget, tops=tops, level=level)
        run.run()
        decisions, fixed = run.frames()
    return VotesRun(arena=arena, method=method, n_items=run.episode.n_items, budget=run.budget,
                    votes_told=run.votes(), looks=run.looks, cpu_seconds=time.process_time() - started,
                    decisions=decisions, fixed_budget=fixed)
