"""The policy protocol: what a policy sees each step (:class:`Step`) and what it returns (:class:`Choice`).

A policy is any object with ``select(step) -> Choice`` (and, optionally,
``update(step, choice, wins) -> None``).  It is built once per replication by a *factory*, a class
or callable taking the resolved :class:`study.Setting`.  The estimator is not the policy's: every
method shares the paper's schedule (:class:`study.simulation.estimator.Estimate`, refitted by the loop in
:mod:`study.simulation.replication` after every step), so policies differ only in which pair they compare.

Randomness is explicit.  Each step carries four uniforms shared by every method of a replication
(common random numbers): ``coin`` (explore or not), ``edge`` (which edge when exploring), ``end``
(which end of it is the major item), ``neighbour`` (which neighbour is the opponent).  Extra
randomness (a Thompson draw, a Gumbel perturbation) comes from ``step.rng``, a numpy Generator
private to the policy, seeded from the replication's policy seed and a stable hash of the method
name; never the global RNG, so results depend on neither the worker nor the order of work.
"""
from __future__ import annotations

import operator
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..core import decisions
from ..simulation.settings import public_view


class _ChoiceFields(NamedTuple):
    major: int
    other: int
    explored: bool = False


class Choice(_ChoiceFields):
    """The pair to compare at one step.

    Attributes
    ----------
    major : int
        The item the regret charges (0-based).
    other : int
        Its opponent; (major, other) must be an edge of the graph.
    explored : bool
        Whether the step explored (recorded in the trajectory).

    Raises
    ------
    TypeError
        ``major`` or ``other`` is not an integer (a bool is not an item: ``Choice(True, False)``
        is refused), or ``explored`` is not a bool.
    """

    __slots__ = ()

    def __new__(cls, major, other, explored=False):
        return super().__new__(cls, item_index("major", major), item_index("other", other),
                               _flag("explored", explored))


def item_index(name: str, value) -> int:
    """``value`` as an item index: an integer (Python or numpy), never a bool or a float."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"Choice.{name} must be an integer item index, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"Choice.{name} must be an integer item index, got {value!r}") from None


def unpack_choice(choice) -> tuple:
    """(major, other, explored) of what a policy returned, the items as ints (``explored`` as it
    came: the caller checks it with :func:`is_flag`); ``TypeError`` unless it is a triple of integer
    items (a bool is not an item)."""
    try:
        major, other, explored = choice
    except (TypeError, ValueError):
        raise TypeError(f"{choice!r} is not a triple (major, other, explored)") from None
    return item_index("major", major), item_index("other", other), explored


def is_flag(value) -> bool:
    """Is ``value`` a bool (Python's or numpy's)?  ``bool("False")`` is True: a flag is never coerced."""
    return isinstance(value, (bool, np.bool_))


def _flag(name: str, value) -> bool:
    if not is_flag(value):
        raise TypeError(f"Choice.{name} must be a bool, got {value!r}")
    return bool(value)


def read_only(array) -> np.ndarray:
    """A read-only view of a fresh copy of ``array``: a write raises ``ValueError`` ("assignment
    destination is read-only"), and the flag cannot be set back (the view's base is read-only), so
    whatever a policy does to what it is handed, the loop's own arrays are untouched."""
    copy = np.array(array, copy=True)
    copy.flags.writeable = False
    return copy.view()


class Step:
    """What a policy sees at step t.

    Attributes
    ----------
    t : int
        The step, 1-based.
    x : ndarray, shape (d,)
        The context X_t (read-only: a copy; writing into it raises ``ValueError``).
    coin, edge, end, neighbour : float
        The step's shared uniforms in [0, 1) (common random numbers across methods).
    graph : study.simulation.graph.ComparisonGraph
        ``edges`` (E, 2), ``neighbours[i]``, ``adjacency`` (n, n), ``playable``, ``connected``.
    setting : study.simulation.settings.PublicSetting
        The resolved setting without its truth (every field but ``truth``: theta* is the
        environment's alone).
    rng : numpy.random.Generator
        The policy's private generator (never the global one).
    theta : ndarray, shape (n, d)
        theta(t-1), the shared estimate (read-only: a copy; writing into it raises ``ValueError``).

    Methods
    -------
    debiased()
        The debiased estimate at theta(t-1) (:class:`study.DebiasResult`; its arrays are read-only).

    Notes
    -----
    Nothing a policy does to what a step hands it can change the environment, the estimator or
    the stored results: ``x`` and ``theta`` are read-only copies (views of read-only arrays, whose
    flag cannot be set back), the graph is the policy's own copy with immutable arrays (the loop
    checks choices against its own), and the loop hands ``debiased()`` a read-only copy of the
    shared result.  Nothing it is handed carries theta*: ``setting`` is a
    :class:`~study.simulation.settings.PublicSetting`.
    """

    __slots__ = ("t", "x", "coin", "edge", "end", "neighbour", "graph", "setting", "rng", "_theta", "_debias")

    def __init__(self, t, x, uniforms, graph, theta, debiased=None, *, rng=None, setting=None):
        self.t = int(t)
        self.x = read_only(x)
        self.coin, self.edge, self.end, self.neighbour = (float(u) for u in uniforms)
        self.graph = graph
        self.setting = public_view(setting)
        self.rng = rng
        self._theta = read_only(theta)
        self._debias = debiased

    @property
    def theta(self) -> np.ndarray:
        """theta(t-1), the shared estimate before this step's comparison (a read-only copy)."""
        return self._theta

    def debiased(self):
        """The debiased estimate at theta(t-1) (:class:`study.DebiasResult`: ``available``,
        ``theta_d``, ``spread(x)``, ``pair_spread(x, pairs)``, ``sample(z)``, ``cov``, ``ci``).
        Computed at most once per step, on first request, and shared with the CI grid."""
        if self._debias is None:
            raise ValueError("this step has no debiased estimate")
        return self._debias() if callable(self._debias) else self._debias

    @property
    def uniforms(self) -> tuple:
        return self.coin, self.edge, self.end, self.neighbour


@runtime_checkable
class Policy(Protocol):
    """The protocol a policy follows: any object with ``select(step) -> Choice``.

    A policy is built once per replication by a *factory* (a class or callable taking the
    resolved :class:`study.Setting`), registered with :func:`study.register_policy` or named by
    an import path ``"package.module:Name"``.

    Methods
    -------
    select(step)
        Return the :class:`Choice` at step t.  The loop validates it (items in range, distinct,
        an edge of the graph) and raises ``ValueError`` naming the policy and the step otherwise.
    update(step, choice, wins), optional
        Called after the comparison, before the shared estimator is refitted; ``wins`` is how
        many of the M comparisons ``choice.other`` won.

    Examples
    --------
    >>> import study
    >>> from study.policies import argmax_playable, uniform_neighbour
    >>> class Greedy:
    ...     def __init__(self, setting):
    ...         pass
    ...     def select(self, step):
    ...         major = argmax_playable(step, step.theta @ step.x)
    ...         return study.Choice(major, uniform_neighbour(step, major), False)
    >>> r = study.run_replication("A", "greedy", seed=1, T=30, T0=10, policy=Greedy)
    >>> len(r.trajectory["t"])
    30
    """

    def select(self, step: Step) -> Choice:
        ...


# --------------------------------------------------------------------------------------------
# Building blocks shared by the policies (all of them draw from the step's shared uniforms)
# --------------------------------------------------------------------------------------------

def pick(u: float, size: int) -> int:
    """Index floor(u * size) of a uniform u in [0, 1), clipped to size - 1."""
    return min(int(u * size), size - 1)


def random_edge(step: Step) -> Choice:
    """An exploration step: a uniformly random edge (uniform ``edge``), its major item a uniformly
    random end (uniform ``end``)."""
    a, b = step.graph.edges[pick(step.edge, len(step.graph.edges))]
    return Choice(int(a), int(b), True) if step.end < 0.5 else Choice(int(b), int(a), True)


def uniform_neighbour(step: Step, major: int) -> int:
    """A uniformly random neighbour of ``major`` (uniform ``neighbour``)."""
    nbrs = step.graph.neighbours[major]
    return int(nbrs[pick(step.neighbour, len(nbrs))])


def argmax_playable(step: Step, scores: np.ndarray) -> int:
    """argmax_i scores_i over the items with at least one neighbour (every item of a connected
    graph; on a raw G(n, p) draw an isolated item cannot be compared, so it cannot be the major
    item).  Ties go to the lowest index."""
    playable = step.graph.playable
    if playable.all():
        return decisions.argmax("major item", scores)
    return decisions.argmax("major item", np.where(playable, scores, -np.inf))


def argmax_neighbour(step: Step, major: int, scores: np.ndarray) -> int:
    """The neighbour j of ``major`` with the largest ``scores[k]`` (scores indexed like
    ``step.graph.neighbours[major]``); ties go to the lowest item index."""
    nbrs = step.graph.neighbours[major]
    return int(nbrs[decisions.argmax("opponent", scores)])


def available(step: Step):
    """The step's debiased result if Phi_11 is available, else None."""
    db = step.debiased()
    return db if db.available else None

