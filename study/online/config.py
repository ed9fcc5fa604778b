"""What a ranker is created with, normalised so that it can be stored (JSON in the store's
``meta`` table) and compared when the store is reopened.

A reopened ranker continues exactly only with the arguments it was created with: every argument
given on reopening must equal the stored one (floats compared exactly), and the ones not given are
taken from the store.  The horizon ``T`` matters even online: the policy's exploration and UCB
widths, the stage-2 ridge lambda_t = c_lambda sqrt(t M log T / n) and the shared uniforms (one
(T, 4) stream) all depend on it, as in :func:`study.run_replication`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from ..core import _validate as check
from ..core.limits import check_ranker_size
from ..simulation.graph import check_edges
from ..simulation.settings import TIE_BREAKS, Setting
from . import horizon

MAX_ABS_THETA0 = 1e6  # an initial utility per unit of context; beyond it every win probability is 0 or 1
DEFAULTS = {"policy": "RB", "T": 10_000, "M": 1, "alpha": 0.25, "gamma": 5.0, "c_lambda": 0.1, "tie_break": "nearest"}


def default_T0(T: int) -> int:
    """T0 = 0.4 T (the paper's 200 of 500), when not given."""
    return (2 * T) // 5


@dataclass(frozen=True)
class Config:
    """A ranker's arguments (see :class:`study.online.Ranker` for their meaning)."""

    n_items: int
    dim: int
    items: tuple | None
    policy: str
    T: int
    T0: int
    M: int
    alpha: float
    gamma: float
    c_lambda: float
    tie_break: str
    seed: dict  # {"entropy": int or list of ints, "spawn_key": [ints]}
    edges: tuple | None  # None: every pair of items
    theta0: tuple  # (n, d) nested tuples
    # The horizon schedule (study.online.horizon): open (epochs of doubling horizon from T) or fixed
    # at T; ``extended``: ((first step, horizon), ...) recorded where the horizon was raised.  Both
    # are left out of the stored JSON at their defaults, so a fixed-T store is stored as before.
    open_horizon: bool = False
    extended: tuple = ()
    # ((first ask step, item), ...): items retired from the asks (study.online.items), kept in the
    # likelihood and the table
    retired: tuple = ()
    # ((first ask step, first told row, item), ...): items added to a live store (study.online.items),
    # the last ones of the index order; the estimator holds an item from the state after told row
    # (first told row - 1) on
    joined: tuple = ()

    # --- building ------------------------------------------------------------------------------
    @classmethod
    def from_arguments(cls, given: dict) -> "Config":
        """A validated config from the creation arguments (None: the default)."""
        g = {k: v for k, v in given.items() if v is not None}
        if "items" in g and "n_items" not in g:
            g["n_items"] = len(g["items"])
        for name in ("n_items", "dim"):
            if name not in g:
                raise ValueError(f"a new ranker needs {name} (the store does not exist yet)")
        n = check.integer("n_items", g["n_items"], low=2, high=check.MAX_INTEGER)
        d = check.integer("dim", g["dim"], low=1, high=check.MAX_INTEGER)
        values = {**DEFAULTS, **g}
        if g.get("open_horizon") is True and "T" not in g:  # created without T: the first epoch by the size
            values["T"] = horizon.first_epoch(n, d, check.integer("M", values["M"], low=1, high=check.MAX_INTEGER))
        if not isinstance(values["policy"], str):
            raise ValueError(f"policy must be a method name or an import path 'package.module:Name', got "
                             f"{values['policy']!r}")
        T = check.integer("T", values["T"], low=1, high=check.MAX_INTEGER)
        edges = g.get("edges")
        try:
            n_edges = None if edges is None else len(edges)
        except TypeError:
            n_edges = None  # not a sequence: normal_edges names it
        check_ranker_size(n, d, T, n_edges)  # before any array of these sizes exists
        values["T0"] = g.get("T0", default_T0(T))
        values["open_horizon"] = horizon.check_open(g.get("open_horizon", False))
        values["extended"] = horizon.normal_extended(g.get("extended", ()), T, values["open_horizon"])
        values["retired"] = normal_retired(g.get("retired", ()), n)
        values["joined"] = normal_joined(g.get("joined", ()), n)
        seed = g["seed"] if "seed" in g else np.random.SeedSequence()
        values.update(n_items=n, dim=d, items=normal_items(g.get("items"), n), seed=normal_seed(seed),
                      edges=normal_edges(g.get("edges"), n),
                      theta0=normal_theta0(g.get("theta0", np.zeros((n, d))), n, d))
        config = cls(**{f.name: values[f.name] for f in fields(cls)})
        config.setting()  # validates T0, M, alpha, gamma, c_lambda, tie_break
        return config

    @classmethod
    def from_json(cls, text: str) -> "Config":
        """The config a store holds, validated as on creation: every field present, no other, each
        in range, and in the form :meth:`to_json` writes (ValueError naming the field otherwise)."""
        try:
            raw = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            raise ValueError("the stored arguments are not JSON (or nested too deeply)") from None
        names = [f.name for f in fields(cls)]
        if not isinstance(raw, dict):
            raise ValueError("the stored arguments are not a JSON object")
        missing = sorted(set(names) - set(raw) - set(horizon.OPTIONAL))
        unknown = sorted(set(raw) - set(names))
        if missing or unknown:
            raise ValueError("the stored arguments " + "; ".join(
                ([f"lack {', '.join(missing)}"] if missing else []) + ([f"have unknown {', '.join(unknown)}"] if unknown
                                                                       else [])))
        if not isinstance(raw["seed"], dict):
            raise ValueError(f"the stored seed is not an object: {_short(raw['seed'])}")
        config = cls.from_arguments(dict(raw))
        written = json.loads(config.to_json())
        if written != raw:
            differences = [name for name in names if written.get(name) != raw.get(name)]
            raise ValueError(f"the stored arguments are not in the form this version writes ({', '.join(differences)})")
        return config

    def to_json(self) -> str:
        values = asdict(self)
        for name, default in horizon.OPTIONAL.items():  # a fixed-T store's arguments as before
            if values[name] == default:
                del values[name]
        for name in ("extended", "retired", "joined"):
            if name in values:
                values[name] = [list(event) for event in values[name]]
        return json.dumps(values, sort_keys=True)

    # --- the horizon ---------------------------------------------------------------------------
    def horizon_at(self, step: int) -> int:
        """The horizon in force at step ``step`` (ask t = step t, told row k = step k)."""
        return horizon.at(self.T, self.open_horizon, self.extended, step)

    @property
    def limit(self) -> int | None:
        """The last ask allowed (None: an open horizon, no last ask)."""
        return None if self.open_horizon else horizon.current(self.T, self.extended)

    def differences(self, given: dict) -> list[str]:
        """'name: stored X, given Y' for every given (not None) argument that differs."""
        out = []
        n, d = self.n_items, self.dim
        for name, value in given.items():
            if value is None:
                continue
            stored = getattr(self, name)
            try:
                normal = {"items": lambda v: normal_items(v, n), "seed": normal_seed,
                          "edges": lambda v: normal_edges(v, n), "theta0": lambda v: normal_theta0(v, n, d)}.get(
                    name, lambda v: v)(value)
            except ValueError as exc:
                out.append(f"{name}: {exc}")
                continue
            if isinstance(stored, float) and not isinstance(normal, bool):
                same = isinstance(normal, (int, float)) and float(normal) == stored
            else:
                same = normal == stored
            if not same:
                out.append(f"{name}: stored {_short(stored)}, given {_short(normal)}")
        return out

    # --- what the loop needs -------------------------------------------------------------------
    def edges_array(self) -> np.ndarray:
        if self.edges is None:
            return np.column_stack(np.triu_indices(self.n_items, k=1)).astype(np.int64)
        return np.array(self.edges, dtype=np.int64).reshape(-1, 2)

    def theta0_array(self) -> np.ndarray:
        return np.array(self.theta0, dtype=float).reshape(self.n_items, self.dim)

    def policy_seed(self) -> np.random.SeedSequence:
        entropy = self.seed["entropy"]
        return np.random.SeedSequence(entropy if isinstance(entropy, int) else list(entropy),
                                      spawn_key=tuple(self.seed["spawn_key"]))

    def setting(self, T: int | None = None) -> Setting:
        """The :class:`study.Setting` the policy and the shared estimator read (T0, alpha, gamma,
        c_lambda, tie-break, M, horizon ``T`` (default: the first), the graph); its truth is a
        placeholder (zeros): online there is none."""
        return Setting(name="online", n_items=self.n_items, dim=self.dim, T=self.T if T is None else T, T0=self.T0,
                       M=self.M,
                       alpha=self.alpha, gamma=self.gamma, c_lambda=self.c_lambda, tie_break=self.tie_break,
                       truth=np.zeros((self.n_items, self.dim)), edges=self.edges_array(), init_var=0.0, ci_every=0)

    def n_at_row(self, row: int) -> int:
        """How many items the estimator holds after told row ``row`` (0: before any)."""
        return self.n_items - sum(1 for _, first_row, _ in self.joined if first_row > row + 1)

    def sub(self, n: int) -> "Config":
        """The config of the first ``n`` items (the store's before the later ones joined)."""
        if n == self.n_items:
            return self
        edges = None if self.edges is None else tuple((a, b) for a, b in self.edges if a < n and b < n)
        return replace(self, n_items=n, items=None if self.items is None else self.items[:n], edges=edges,
                       theta0=self.theta0[:n], joined=tuple(e for e in self.joined if e[2] < n),
                       retired=tuple(e for e in self.retired if e[1] < n))

    def retired_at(self, t: int) -> frozenset:
        """The items retired before ask ``t`` (never asked from it on)."""
        return frozenset(item for step, item in self.retired if step <= t)

    def active_edges(self, t: int) -> np.ndarray:
        """The edges of the graph among the items not retired before ask ``t``."""
        edges = self.edges_array()
        gone = self.retired_at(t)
        if not gone:
            return edges
        keep = ~(np.isin(edges[:, 0], list(gone)) | np.isin(edges[:, 1], list(gone)))
        return edges[keep]

    @property
    def labels(self) -> list:
        return list(self.items) if self.items is not None else [str(k) for k in range(self.n_items)]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def normal_items(items, n: int):
    if items is None:
        return None
    if isinstance(items, str):
        raise ValueError("items must be a sequence of item names, not one string")
    names = tuple(str(x) for x in items)
    if len(names) != n:
        raise ValueError(f"items has {len(names)} names but n_items = {n}")
    if len(set(names)) != n:
        raise ValueError("items must be distinct names")
    return names


def normal_retired(events, n: int) -> tuple:
    """((first ask step, item), ...) validated: steps non-decreasing from 1, items of 0..n-1, each once."""
    if isinstance(events, (str, bytes)) or not hasattr(events, "__iter__"):
        raise ValueError(f"retired must be a sequence of (first ask step, item) pairs, got {_short(events)}")
    out, last, seen = [], 1, set()
    for event in events:
        try:
            step, item = event
        except (TypeError, ValueError):
            raise ValueError(f"retired: {_short(event)} is not a (first ask step, item) pair") from None
        step = check.integer("retired step", step, low=last, high=check.MAX_INTEGER)
        item = check.integer("retired item", item, low=0, high=n - 1)
        if item in seen:
            raise ValueError(f"retired: item {item} is retired twice")
        out.append((step, item))
        last = step
        seen.add(item)
    return tuple(out)


def normal_joined(events, n: int) -> tuple:
    """((first ask step, first told row, item), ...) validated: the last items in order, steps and
    rows non-decreasing from 1."""
    if isinstance(events, (str, bytes)) or not hasattr(events, "__iter__"):
        raise ValueError(f"joined must be a sequence of (first ask, first told row, item), got {_short(events)}")
    events = list(events)
    out, last = [], (1, 1)
    for k, event in enumerate(events):
        try:
            step, row, item = event
        except (TypeError, ValueError):
            raise ValueError(f"joined: {_short(event)} is not a (first ask, first told row, item) triple") from None
        step = check.integer("joined step", step, low=last[0], high=check.MAX_INTEGER)
        row = check.integer("joined row", row, low=last[1], high=step)
        item = check.integer("joined item", item, low=0, high=n - 1)
        if item != n - len(events) + k:
            raise ValueError(f"joined: item {item} is not the {k + 1}th of the last {len(events)} items")
        out.append((step, row, item))
        last = (step, row)
    return tuple(out)


def normal_seed(seed) -> dict:
    if isinstance(seed, dict):
        return _stored_seed(seed)
    if isinstance(seed, np.random.SeedSequence):
        if seed.pool_size != 4:
            raise ValueError("seed: a SeedSequence with a non-default pool_size cannot be stored")
        entropy = seed.entropy
        entropy = int(entropy) if isinstance(entropy, (int, np.integer)) else [int(e) for e in entropy]
        return {"entropy": entropy, "spawn_key": [int(k) for k in seed.spawn_key]}
    try:
        value = check.integer("seed", seed, low=0)
    except ValueError:
        raise ValueError(f"seed must be a non-negative integer or a numpy SeedSequence, got {seed!r}") from None
    return {"entropy": value, "spawn_key": []}


def _stored_seed(seed: dict) -> dict:
    """A seed as stored ({"entropy": int or [ints], "spawn_key": [ints]}), validated."""
    entropy, key = seed.get("entropy"), seed.get("spawn_key")

    def natural(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if set(seed) != {"entropy", "spawn_key"} or not (
            natural(entropy) or (isinstance(entropy, list) and entropy and all(natural(e) for e in entropy))) or \
            not isinstance(key, (list, tuple)) or not all(natural(k) for k in key):
        raise ValueError(f"seed must be {{'entropy': int >= 0 or [ints], 'spawn_key': [ints]}}, got {_short(seed)}")
    return {"entropy": entropy, "spawn_key": list(key)}


def normal_edges(edges, n: int):
    """The edges as given (their order and orientation decide which edge a uniform picks, as in the
    simulations), validated; None for every pair in ``np.triu_indices`` order."""
    if edges is None:
        return None
    unique = check_edges(edges, n, connected=True)
    given = np.asarray(edges).astype(np.int64)
    if len(unique) != len(given):
        raise ValueError("edges lists a pair twice")
    if np.array_equal(given, np.column_stack(np.triu_indices(n, k=1))):
        return None  # every pair, in the default order
    return tuple((int(a), int(b)) for a, b in given)


def normal_theta0(theta0, n: int, d: int) -> tuple:
    arr = bounded_array("theta0", theta0, MAX_ABS_THETA0, ndim=2, shape=(n, d))
    return tuple(tuple(float(v) for v in row) for row in arr)


def bounded_array(name: str, value, bound: float, **shape) -> np.ndarray:
    """A finite float array with entries within +-``bound`` (ValueError naming ``name``; a Python
    integer too large for a float is refused too, not an OverflowError)."""
    array = check.finite_array(name, value, **shape)
    largest = float(np.abs(array).max(initial=0.0))
    if largest > bound:
        raise ValueError(f"{name} has entries as large as {largest:.3g}; they must lie within +-{bound:g} "
                         "(rescale them)")
    return array


__all__ = ["Config", "DEFAULTS", "MAX_ABS_THETA0", "TIE_BREAKS", "bounded_array", "default_T0"]
