"""Simulation settings: the paper's Settings A and B (section "Numerical Studies") as frozen,
validated objects.  Any field can be overridden with :meth:`Setting.replace`."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..core import _validate as check
from ..core.limits import MEMORY_LIMIT_BYTES, TIME_LIMIT_SECONDS, check_replication_size
from .graph import GRAPHS, check_edges

TIE_BREAKS = ("nearest", "min_norm", "exact")
TRUTHS = ("paired", "identity", "normal")
# What a method whose rule needs Phi does while Phi does not exist (docs/baselines.md, "One warm-up
# protocol"): its own rule, uniformly random edges, or the greedy item against a uniform neighbour.
WARMUPS = ("own", "random", "greedy")
# Scales beyond which a setting's numbers are rounding noise: a context mean of c adds c 1'theta_i
# to every utility, which cancels between items only to within c * 1e-16 (c = 1e50 stored regrets
# of 9e33), and parameters of this size saturate every comparison probability.
MAX_SCALE = 1e6
MAX_INT = 2 ** 63 - 1  # integer fields: numpy's int64, and a float without overflow
GRAPH_SECONDS_PER_DRAW = 2e-6  # one G(n, p) draw and its connectivity check at small n (measured ~2-20 us)


def paired_truth(n_items: int, dim: int) -> np.ndarray:
    """Setting A: theta*_{i,2i-1} = theta*_{i,2i} = 1 (1-based), all other entries 0."""
    if dim < 2 * n_items:
        raise ValueError(f"truth='paired' needs dim >= 2 * n_items, got dim={dim}, n_items={n_items}")
    theta = np.zeros((n_items, dim))
    for item in range(n_items):
        theta[item, 2 * item: 2 * item + 2] = 1.0
    return theta


def identity_truth(n_items: int, dim: int) -> np.ndarray:
    """Setting B: row i of theta* is the canonical basis vector e_i."""
    if dim < n_items:
        raise ValueError(f"truth='identity' needs dim >= n_items, got dim={dim}, n_items={n_items}")
    return np.eye(n_items, dim)


@dataclass(frozen=True, eq=False)
class Setting:
    """One simulation setting.  Field names follow the paper's symbols.

    ``truth='normal'`` draws theta* per replication (entries N(0, truth_scale^2 / d), so that
    E||theta*_i||^2 = truth_scale^2) from the replication's seed; the fixed truths are
    ``'paired'`` (Setting A), ``'identity'`` (Setting B) or an explicit (n_items, dim) array.
    ``p`` is the Erdos-Renyi edge probability, a number in (0, 1] or a multiple of log(n)/n
    written ``"2log(n)/n"`` (capped at 1), so that a graph keeps its connectivity as n grows.

    ``gamma`` is the stage-1 radius (label ``opt1``); ``c_lambda`` scales the stage-2 ridge
    lambda_t = c_lambda * sqrt(t M log T / n) (label ``opt``).  The paper gives values for neither;
    docs/core.md gives the choice, docs/sensitivity.md its effect.  ``init_mean='item'`` draws theta_i(0) from
    N(i, init_var) with i 1-based (Setting A); a number draws every entry from N(init_mean, init_var).
    """

    name: str
    """The setting's label in every output ("A", "B", or a name of one's own)."""
    n_items: int
    """n, the number of items (at least 2)."""
    dim: int
    """d, the context dimension."""
    T: int = 500
    """The horizon: steps per replication."""
    T0: int = 200
    """The end of the first stage: the constrained MLE (``opt1``) up to T0, the ridge MLE (``opt``)
    after; RB and BT-UCB2 explore with probability 1/t^alpha up to T0.  It stays 200 (the paper's)
    whatever T is; set it with T (the paper's ratio is T0 = 0.4 T), or let ``T0_rule`` follow T."""
    T0_rule: object = None
    """A rule that sets T0 from T, a fraction written ``"0.4T"`` (T0 = round(0.4 T)), so that T0
    follows ``--set T=...``; setting ``T0`` explicitly (``replace(T0=...)``) drops the rule.
    None (default): ``T0`` as given."""
    M: int = 20
    """Comparisons drawn per step."""
    p: object = 0.3
    """Erdos-Renyi edge probability: a number in (0, 1], or ``"clog(n)/n"`` (c log(n)/n capped at 1)
    so that the graph keeps its connectivity as n grows."""
    alpha: float = 0.25
    """Exploration exponent: explore with probability 1/t^alpha (paper: 1/4)."""
    context_mean: float = 1.0
    """Contexts are N(context_mean 1_d, context_var I_d) (paper: N(1, 0.5))."""
    context_var: float = 0.5
    """See ``context_mean``."""
    truth: object = "paired"
    """theta*: ``"paired"`` (Setting A: theta*_{i,2i-1} = theta*_{i,2i} = 1), ``"identity"`` (Setting B:
    theta*_i = e_i), ``"normal"`` (drawn per replication) or an explicit (n, d) array."""
    truth_scale: float = 1.0
    """With ``truth="normal"``: E||theta*_i||^2 = truth_scale^2."""
    init_mean: object = 0.0
    """theta(0) entries ~ N(init_mean, init_var); ``"item"``: N(i, init_var), i 1-based (Setting A)."""
    init_var: float = 5.0
    """See ``init_mean`` (paper: 5)."""
    gamma: float = 5.0
    """Stage-1 radius of the constrained MLE (label ``opt1``); must contain theta*."""
    c_lambda: float = 0.1
    """Stage-2 ridge scale: lambda_t = c_lambda sqrt(t M log T / n) (label ``opt``); the paper
    gives no value (docs/sensitivity.md)."""
    tie_break: str = "nearest"
    """Where the data leave theta unidentified: ``"nearest"`` to theta(t-1), or ``"min_norm"`` (the
    tie-broken point of the proximal term, polished); ``"exact"``: stage 1's exact nearest argmin to
    theta(t-1) (docs/core.md; selectable, not yet the default)."""
    ci_every: int = 10
    """Record the debiased CIs every this many steps (0: never); a policy that asks for the
    debiased estimate gets it at every step regardless."""
    ci_level: float = 0.95
    """Nominal level of the CIs."""
    edges: object = None
    """An explicit (E, 2) comparison graph instead of an Erdos-Renyi draw."""
    max_graph_draws: int = 10_000
    """Erdos-Renyi draws allowed until the graph protocol (``graph``) accepts one."""
    graph: str = "connected"
    """How G(n, p) is drawn: ``"connected"`` (redrawn until connected, the default), ``"no_isolated"``
    (redrawn only while some item has no edge; possibly several components) or ``"raw"`` (one draw,
    redrawn only while it has no edge).  The three read the same draws (docs/sensitivity.md)."""
    warmup: str = "own"
    """What the methods whose rule needs Phi (BT-UCB1/2, TS, MaxInP, CoLSTIM, ...) do while Phi does
    not exist (Psi_t singular): ``"own"`` each method's own rule (BT-UCB and TS greedy, the others
    random edges: docs/baselines.md), ``"random"`` a uniformly random edge, ``"greedy"`` the greedy
    item against a uniform neighbour, the same for every method.  RB, ERA and ETA never need Phi."""
    time_limit: object = None
    """Seconds one replication may run on a Ray worker, at most a day; a replication still running
    then is stopped (its process ended if the policy ignores the stop) and recorded as failed with
    ``ReplicationTimeout`` (None: no limit).  It changes no stored number, so it is not part of a
    study's fingerprint."""

    def __post_init__(self):
        check.integer("n_items", self.n_items, low=2, high=MAX_INT)
        check.integer("dim", self.dim, low=1, high=MAX_INT)
        check.integer("T", self.T, low=1, high=MAX_INT)
        if self.T0_rule is not None:
            object.__setattr__(self, "T0", horizon_fraction(self.T0_rule, self.T))
        check.integer("T0", self.T0, low=0, high=MAX_INT)
        if self.T0 > self.T:
            raise ValueError(f"T0 must lie in [0, T={self.T}], got T0={self.T0} (T0 is 200, the paper's, unless "
                             f"set: with a shorter horizon set it too, e.g. T0={round(0.4 * self.T)}, the paper's "
                             "ratio T0 = 0.4 T)")
        check.integer("M", self.M, low=1, high=MAX_INT)
        self.edge_probability  # validates p
        check.real("alpha", self.alpha, low=0.0, high=1.0, low_open=True, high_open=True)
        check.real("context_mean", self.context_mean, low=-MAX_SCALE, high=MAX_SCALE)
        check.real("context_var", self.context_var, low=0.0, high=MAX_SCALE ** 2)
        check.real("init_var", self.init_var, low=0.0, high=MAX_SCALE ** 2)
        if not (isinstance(self.init_mean, str) and self.init_mean == "item"):
            check.real("init_mean", self.init_mean, low=-MAX_SCALE, high=MAX_SCALE)
        check.real("gamma", self.gamma, low=0.0, high=MAX_SCALE, low_open=True)
        check.real("c_lambda", self.c_lambda, low=0.0, high=MAX_SCALE)
        if self.time_limit is not None:
            check.real("time_limit", self.time_limit, low=0.0, high=TIME_LIMIT_SECONDS, low_open=True)
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")
        check.integer("ci_every", self.ci_every, low=0, high=MAX_INT)
        check.real("ci_level", self.ci_level, low=0.0, high=1.0, low_open=True, high_open=True)
        check.integer("max_graph_draws", self.max_graph_draws, low=1, high=MAX_INT)
        check_replication_size(self.n_items, self.dim, self.T,  # before any truth is built
                               self.T // self.ci_every if self.ci_every else 0)
        check_environment_size(self.T, self.M, self.dim, self.n_items, self.edges is None)
        check.real("truth_scale", self.truth_scale, low=0.0, high=MAX_SCALE, low_open=True)
        for name in ("truth", "edges"):  # arrays are kept read-only: a policy sees the setting
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, _read_only(value))
        if not self.random_truth:
            truth = self.theta_star  # validates shape and finiteness
            if np.abs(truth).max() > MAX_SCALE:
                raise ValueError(f"truth has entries as large as {np.abs(truth).max():.3g}; at most {MAX_SCALE:g} "
                                 "in absolute value (beyond, every comparison is decided with certainty)")
            check_truth_in_ball(truth, self.gamma)
        if self.graph not in GRAPHS:
            raise ValueError(f"graph must be one of {GRAPHS}, got {self.graph!r}")
        if not isinstance(self.warmup, str) or self.warmup not in WARMUPS:
            raise ValueError(f"warmup must be one of {WARMUPS}, got {self.warmup!r}")
        if self.edges is not None:
            check_edges(self.edges, self.n_items, protocol=self.graph)
        else:
            check_graph_reachable(self.n_items, self.edge_probability, self.max_graph_draws, self.graph)

    @property
    def random_truth(self) -> bool:
        return isinstance(self.truth, str) and self.truth == "normal"

    @property
    def edge_probability(self) -> float:
        """p as a number: ``p`` itself, or c log(n)/n (capped at 1) for ``p = "clog(n)/n"``."""
        if isinstance(self.p, str):
            match = _LOG_DENSITY.fullmatch(self.p.replace(" ", ""))
            if match is None:
                raise ValueError(f"p must be a number in (0, 1] or a multiple of log(n)/n such as '2log(n)/n', "
                                 f"got {self.p!r}")
            factor = check.real("the multiple of log(n)/n in p", float(match.group(1) or 1.0), low=0.0,
                                low_open=True)
            return min(1.0, factor * float(np.log(self.n_items)) / self.n_items)
        return check.real("p", self.p, low=0.0, high=1.0, low_open=True)

    def draw_truth(self, rng: np.random.Generator) -> np.ndarray:
        """theta* for one replication (not centred): the fixed truth, or a ``'normal'`` draw."""
        if not self.random_truth:
            return self.theta_star
        truth = rng.standard_normal((self.n_items, self.dim)) * (self.truth_scale / np.sqrt(self.dim))
        check_truth_in_ball(truth, self.gamma)
        return truth

    @property
    def theta_star(self) -> np.ndarray:
        """True attributes as given (not centred); a ``'normal'`` truth is drawn per replication
        (:meth:`draw_truth`) and has no fixed value."""
        if self.random_truth:
            raise ValueError("truth='normal' is drawn per replication (Setting.draw_truth); it has no fixed value")
        if isinstance(self.truth, str):
            if self.truth == "paired":
                return paired_truth(self.n_items, self.dim)
            if self.truth == "identity":
                return identity_truth(self.n_items, self.dim)
            raise ValueError(f"truth must be one of {TRUTHS} or an (n_items, dim) array, got {self.truth!r}")
        return check.finite_array("truth", self.truth, ndim=2, shape=(self.n_items, self.dim)).copy()

    @property
    def theta_star_centred(self) -> np.ndarray:
        theta = self.theta_star
        return theta - theta.mean(axis=0)

    def replace(self, **overrides) -> "Setting":
        unknown = set(overrides) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown setting field(s) {sorted(unknown)}; allowed: "
                             f"{[f.name for f in dataclasses.fields(self)]}")
        if "T0" in overrides and "T0_rule" not in overrides:  # an explicit T0 replaces the rule
            overrides["T0_rule"] = None
        return dataclasses.replace(self, **overrides)

    def lambda_t(self, t: int) -> float:
        """Stage-2 ridge weight lambda_t = c_lambda sqrt(t M log T / n) (Theorem "Exploitation stage rate")."""
        return self.c_lambda * float(np.sqrt(t * self.M * np.log(max(self.T, 2)) / self.n_items))

    def to_dict(self) -> dict:
        """JSON-friendly record of every field (arrays as nested lists)."""
        return _as_dict(self, [f.name for f in dataclasses.fields(self)])

    def public(self) -> "PublicSetting":
        """The setting as a policy sees it: every field but the truth (:class:`PublicSetting`)."""
        return PublicSetting(self)


def _as_dict(setting, names) -> dict:
    out = {}
    for name in names:
        value = getattr(setting, name)
        out[name] = np.asarray(value).tolist() if isinstance(value, (np.ndarray, list, tuple)) else value
    return out


# What a policy may not see: theta* itself, or the name that determines it ("paired", "identity").
HIDDEN_FIELDS = ("truth",)
_TRUTH_NAMES = HIDDEN_FIELDS + ("theta_star", "theta_star_centred", "draw_truth", "random_truth")
PUBLIC_FIELDS = tuple(f.name for f in dataclasses.fields(Setting) if f.name not in HIDDEN_FIELDS)


class PublicSetting:
    """A :class:`Setting` as a policy sees it (the factory's argument and ``step.setting``): every
    field but ``truth``, copied (no reference to the Setting behind it), read-only.

    The truth (theta*, or the name that determines it) is held by the environment alone, so that
    no policy can read it by accident: ``truth``, ``theta_star``, ``theta_star_centred``,
    ``draw_truth`` and ``random_truth`` raise ``AttributeError``.  ``lambda_t``,
    ``edge_probability`` and ``to_dict`` work as on the setting.
    """

    __slots__ = PUBLIC_FIELDS

    def __init__(self, setting):
        for name in PUBLIC_FIELDS:
            object.__setattr__(self, name, getattr(setting, name))

    def __getattr__(self, name):  # only reached for names that are not slots
        if name in _TRUTH_NAMES:
            raise AttributeError(f"a policy cannot see the truth: Setting.{name} is held by the environment alone "
                                 "(a policy gets every other field of the setting; docs/baselines.md)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"the setting a policy is handed is read-only (cannot set {name!r})")

    def __delattr__(self, name):
        raise AttributeError(f"the setting a policy is handed is read-only (cannot delete {name!r})")

    def __reduce__(self):
        return _public_setting, ({name: getattr(self, name) for name in PUBLIC_FIELDS},)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in ("name", "n_items", "dim", "T", "T0", "M",
                                                                          "warmup"))
        return f"PublicSetting({shown}, truth=<hidden>)"

    lambda_t = Setting.lambda_t
    edge_probability = Setting.edge_probability

    def to_dict(self) -> dict:
        """JSON-friendly record of every public field (arrays as nested lists)."""
        return _as_dict(self, PUBLIC_FIELDS)


def _public_setting(fields: dict) -> PublicSetting:
    view = object.__new__(PublicSetting)
    for name, value in fields.items():
        object.__setattr__(view, name, value)
    return view


def public_view(setting):
    """What a policy is handed of ``setting``: its :class:`PublicSetting` (None stays None)."""
    if setting is None or isinstance(setting, PublicSetting):
        return setting
    return setting.public()


_FRACTION_OF_T = re.compile(r"([0-9]*\.?[0-9]+)\*?T")


def horizon_fraction(rule, T: int) -> int:
    """T0 from a rule such as ``"0.4T"`` (or a number in [0, 1], the fraction itself)."""
    if isinstance(rule, str):
        match = _FRACTION_OF_T.fullmatch(rule.replace(" ", ""))
        if match is None:
            raise ValueError(f"T0_rule must be a fraction of T such as '0.4T', got {rule!r}")
        rule = float(match.group(1))
    fraction = check.real("T0_rule", rule, low=0.0, high=1.0)
    return int(round(fraction * T))


def _read_only(value):
    """A read-only view of a private copy of an array field (its flag cannot be set back); the
    value itself when it is not an array (its own check names the problem)."""
    try:
        array = np.array(value)
    except (TypeError, ValueError):
        return value
    if array.dtype == object:
        return value
    array.flags.writeable = False
    return array.view()


def check_environment_size(T: int, M: int, dim: int, n_items: int, drawn_graph: bool) -> None:
    """ValueError when the environment's draws, made up front, would clearly exceed memory: the
    T x M outcome uniforms, the T x d contexts and, for an Erdos-Renyi graph, its n(n-1)/2
    candidate pairs (indices and uniforms) and the n x n adjacency."""
    uniforms = 8.0 * T * (M + dim)
    graph = (24.0 * n_items * (n_items - 1) / 2 if drawn_graph else 0.0) + float(n_items) ** 2
    if uniforms + graph > MEMORY_LIMIT_BYTES:
        what = (f"M={M} with T={T}: the environment draws the T x M outcome uniforms up front" if uniforms >= graph
                else f"n_items={n_items}: the environment draws the graph's n(n-1)/2 candidate edges up front")
        raise ValueError(f"{what}, about {(uniforms + graph) / 2 ** 30:.3g} GiB of memory (limit "
                         f"{MEMORY_LIMIT_BYTES / 2 ** 30:g} GiB): out of reach; reduce M, T or n_items")


def _log_connected_bound(n: int, p: float, graph: str) -> float:
    """An upper bound on log P(one G(n, p) draw is accepted): connected (a union bound over the
    n^(n-2) spanning trees, and no isolated item 0), for ``graph="no_isolated"`` no isolated item 0,
    or, for ``graph="raw"``, having an edge."""
    log_q = np.log1p(-p) if p < 1.0 else -np.inf
    if graph == "raw":
        return float(np.log(-np.expm1(n * (n - 1) / 2 * log_q))) if p < 1.0 else 0.0
    trees = (n - 2) * np.log(n) + (n - 1) * np.log(p)
    not_isolated = np.log(-np.expm1((n - 1) * log_q)) if p < 1.0 else 0.0
    return float(min(0.0, not_isolated) if graph == "no_isolated" else min(0.0, trees, not_isolated))


def check_graph_reachable(n: int, p: float, max_draws: int, graph: str) -> None:
    """ValueError when drawing the Erdos-Renyi graph is clearly out of reach: it almost surely
    fails within ``max_draws`` draws, or the draws it needs would take more than a day."""
    log_accept = _log_connected_bound(n, p, graph)
    accepted = {"raw": "has an edge", "no_isolated": "has no isolated item"}.get(graph, "is connected")
    chance = f"a G(n={n}, p={p:.3g}) draw {accepted} with probability at most {np.exp(log_accept):.3g}"
    if log_accept + np.log(max_draws) < np.log(1e-6):
        raise ValueError(f"{chance}, so max_graph_draws={max_draws} draws would almost surely all fail; "
                         "raise p (e.g. p='2log(n)/n'), or pass edges explicitly")
    draws = min(float(max_draws), float(np.exp(min(-log_accept, 700.0))))
    seconds = draws * GRAPH_SECONDS_PER_DRAW * max(1.0, n * n / 100.0)
    if seconds > TIME_LIMIT_SECONDS:
        raise ValueError(f"{chance}: drawing the graph would take about {draws:.3g} draws, "
                         f"{seconds / 3600:.3g} CPU-hours per replication (limit {TIME_LIMIT_SECONDS / 3600:g} h); "
                         "raise p or lower max_graph_draws, or pass edges explicitly")


_LOG_DENSITY = re.compile(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)?\*?log\(n\)/n")


def check_truth_in_ball(truth: np.ndarray, gamma: float) -> None:
    largest = float(np.linalg.norm(truth - truth.mean(axis=0), axis=1).max())
    if gamma < largest:
        raise ValueError(f"gamma={gamma} is smaller than the largest centred true item norm ({largest:.3g}); "
                         "the stage-1 constraint set must contain theta*")


# The paper's settings; named settings of one's own join them (:mod:`study.simulation.named`).
BUILTIN_SETTINGS = MappingProxyType({
    "A": Setting(name="A", n_items=5, dim=10, M=20, p=0.3, truth="paired", init_mean="item"),
    "B": Setting(name="B", n_items=10, dim=10, M=50, p=0.15, truth="identity", init_mean=0.0),
    # Long horizons at realistic sizes: n items with 10-d contexts, theta* drawn per
    # replication, a graph of average degree about 2 log(n), T0 = 0.4 T; size it with --set n_items=...
    # --set T=... (T0 follows).  CIs on a grid of 50 points.
    "L": Setting(name="L", n_items=100, dim=10, T=10_000, T0_rule="0.4T", M=50, p="2log(n)/n", truth="normal",
                 init_mean=0.0, ci_every=200),
})
_NAMED = dict(BUILTIN_SETTINGS)
SETTINGS = MappingProxyType(_NAMED)  # a live read-only view: the built-in and the registered settings


def resolve_setting(setting, **overrides) -> Setting:
    """A setting name (built in or registered) or object, with overrides applied (validated)."""
    if isinstance(setting, Setting):
        base = setting
    elif isinstance(setting, str):
        if setting not in SETTINGS:
            raise ValueError(f"unknown setting {setting!r}; allowed: {sorted(SETTINGS)} (name your own with "
                             "study.register_setting or a settings file: docs/settings.md)")
        base = SETTINGS[setting]
    else:
        raise ValueError(f"setting must be a name in {sorted(SETTINGS)} or a Setting, got {type(setting).__name__}")
    return base.replace(**overrides) if overrides else base
