"""The plan of a study: its cells and replications, validated before any Ray task starts.

Every replication has a key ``(setting, method, M, rep)`` and a seed that depends only on the root
seed, the study's seed namespace (:func:`study.runner.catalogue.seed_namespace`), the base setting
name and ``rep`` (:func:`study.simulation.seeds.replication_seed`), so the numbers never depend on
the worker count, the batch size or the order in which tasks finish, and all methods (and, in the
M-sweep, all values of M) of replication ``rep`` share one environment (common random numbers).
"""
from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import dataclass, field

from .._util import import_object
from ..core import _validate as check
from ..policies import ALL_METHODS, check_method, registered_policies
from ..simulation.seeds import replication_seed
from ..simulation.named import setting_from_path
from ..simulation.settings import BUILTIN_SETTINGS, SETTINGS, resolve_setting
from .catalogue import DEFAULT_SEED, MAX_REPS, REPLAY_STUDIES, STUDIES, seed_namespace
from .fingerprint import plan_fingerprint, policy_records


@dataclass(frozen=True)
class Cell:
    """One (setting, method, M) of a study, with the overrides that resolve its setting."""

    setting: str            # base setting name
    method: str
    M: int
    overrides: tuple        # sorted (field, value) pairs applied to SETTINGS[setting], M included
    base: object = field(default=None, compare=False, repr=False)  # replay studies: the base Setting
    # a named setting beyond A and B (registered in the driver's process only): travels with the task
    named: object = field(default=None, compare=False, repr=False)

    def resolve(self):
        """The cell's :class:`study.Setting`, overrides applied (validated)."""
        base = self.base if self.base is not None else self.named if self.named is not None else self.setting
        return resolve_setting(base, **dict(self.overrides))

    @property
    def key(self) -> tuple:
        return (self.setting, self.method, self.M)

    @property
    def label(self) -> str:
        return f"{self.setting}/{self.method}/M={self.M}"


@dataclass(frozen=True)
class Plan:
    """A validated study: its cells times ``reps`` replications, and everything that fixes their
    numbers (:meth:`fingerprint`)."""

    study: str
    root_seed: int
    reps: int
    cells: tuple
    overrides: tuple        # user overrides (--set), before the study's own
    provenance: tuple = ()  # replay studies: sorted (key, value) pairs of the source's provenance
    replicate: object = field(default=None, compare=False, repr=False)  # replay studies: the hook
    # policies registered in this process (study.register_policy): shipped to the workers by value
    factories: tuple = field(default=(), compare=False, repr=False)

    @property
    def n_replications(self) -> int:
        return len(self.cells) * self.reps

    def keys(self):
        """Every key, lazily (never a list: ``reps`` may be large)."""
        for cell in self.cells:
            for rep in range(self.reps):
                yield (cell.setting, cell.method, cell.M, rep)

    def count_stored(self, done) -> int:
        """How many of this plan's keys are in the set ``done`` (without enumerating the plan)."""
        cells = {c.key for c in self.cells}
        return sum(1 for k in done if k[:3] in cells and 0 <= k[3] < self.reps)

    @property
    def namespace(self) -> str:
        return seed_namespace(self.study)

    def seed(self, setting: str, rep: int) -> int:
        return replication_seed(self.root_seed, self.namespace, setting, rep)

    def fingerprint(self) -> dict:
        """Everything that affects the numbers (not ``reps``: more reps only add keys)."""
        return plan_fingerprint(self)


def make_plan(study: str, *, settings=None, methods=None, reps=None, seed=DEFAULT_SEED,
              overrides=None, m_values=None, source=None) -> Plan:
    """Validate a study's configuration (no Ray involved) and list its cells.

    Parameters
    ----------
    study : str
        A name of :data:`study.runner.STUDIES`.
    settings, methods : sequence of str, optional
        Default: the study's. Settings may be built-in names (A, B), names registered with
        :func:`study.register_setting` (or read from a settings file), or import paths
        ``"package.module:NAME"`` of a Setting, which label the outputs by the Setting's name.
        Methods may be built-in names, registered names or import paths.
    reps : int, optional
        Replications per cell (default: the study's), at most ``MAX_REPS``.
    seed : int
        Root seed in [0, 2**63).
    overrides : dict, optional
        Setting fields applied to every setting (validated by ``Setting.replace``).
    m_values : sequence of int, optional
        msweep only: one M grid for all settings instead of the per-setting one.
    source : dict, optional
        Replay studies only: keyword options of the study's source, e.g. ``{"judgments": "my.csv"}``
        for ``byo``; the source reads and validates its data here.

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        On any bad input, with a message naming it.
    """
    spec = _study_spec(study)
    settings = tuple(spec.settings if settings is None else _named_settings(settings))
    methods = tuple(spec.methods if methods is None else methods)
    _check_names(study, spec, settings, methods, source)
    reps = check.integer("reps", spec.reps if reps is None else reps, low=1)
    if reps > MAX_REPS:
        raise ValueError(f"reps must be at most {MAX_REPS:,} per cell, got {reps:,} (the stored table would "
                         "not fit on any disk)")
    seed = check.integer("seed", seed, low=0, high=2 ** 63 - 1)
    user = _check_overrides(spec, dict(overrides or {}), m_values)
    m_values = None if m_values is None else tuple(check.integer("M value", m, low=1) for m in m_values)
    if m_values is not None and not m_values:
        raise ValueError("m_values must list at least one M")
    bases, provenance, hook = _replay_bases(study, spec, settings, user, source)
    cells = []
    for name in settings:
        for M, with_m in _m_grid(spec, name, bases.get(name), user, m_values):
            named = SETTINGS[name] if name not in BUILTIN_SETTINGS and name not in bases else None
            cells.extend(Cell(name, method, M, tuple(sorted(with_m.items())), base=bases.get(name), named=named)
                         for method in methods)
    registered = registered_policies()
    factories = tuple((m, registered[m]) for m in methods if m in registered and m not in ALL_METHODS)
    cells = tuple(cells)
    policy_records(cells)  # a user policy whose source cannot be hashed is refused here, before Ray
    return Plan(study=study, root_seed=seed, reps=reps, cells=cells, overrides=tuple(sorted(user.items())),
                provenance=tuple(sorted(provenance.items())), replicate=hook, factories=factories)


def _named_settings(settings) -> tuple:
    """Setting names, with import paths ``"package.module:NAME"`` registered and replaced by the
    Setting's own name (its label in every output)."""
    if isinstance(settings, str):
        settings = (settings,)
    return tuple(setting_from_path(s).name if isinstance(s, str) and ":" in s else s for s in settings)


def _study_spec(study):
    """The catalogue entry of ``study``, or ValueError listing the studies."""
    if study not in STUDIES:
        raise ValueError(f"unknown study {study!r}; allowed: {list(STUDIES)}")
    return STUDIES[study]


def _check_names(study, spec, settings, methods, source) -> None:
    """Settings, methods (imported now) and source options valid for ``study``, or ValueError."""
    if not settings:
        raise ValueError("at least one setting is required")
    if not methods:
        raise ValueError("at least one method is required")
    allowed = spec.settings if spec.source is not None else tuple(sorted(SETTINGS))
    for name in settings:
        if name not in allowed:
            hint = "" if spec.source is not None else (
                " (name your own in a settings file, --settings-file, or with study.register_setting: "
                "docs/settings.md)")
            raise ValueError(f"unknown setting {name!r}; allowed: {sorted(allowed)}{hint}")
    if source is not None and spec.source is None:
        raise ValueError(f"study {study!r} takes no source options (only {list(REPLAY_STUDIES)} do)")
    for method in methods:
        check_method(method)
    if len(set(settings)) != len(settings) or len(set(methods)) != len(methods):
        raise ValueError("settings and methods must not repeat")


def _check_overrides(spec, user: dict, m_values) -> dict:
    """The user's overrides, refused where the study sets the field itself."""
    if "name" in user:
        raise ValueError("the setting field 'name' cannot be overridden; choose settings with --settings")
    if spec.m_values is not None and "M" in user:
        raise ValueError("the M-sweep sets M itself; use --m-values instead of overriding M")
    if m_values is not None and spec.m_values is None:
        raise ValueError("m_values applies to the msweep study only; override M with --set M=...")
    own = spec.overrides.get("warmup")
    if own is not None and "warmup" in user and user["warmup"] != own:
        raise ValueError(f"this study runs warm-up {own!r} (its definition); --set warmup={user['warmup']} belongs to "
                         "another study of jobs/baselines.py (baselines_random, baselines_greedy, baselines)")
    return user


def _replay_bases(study, spec, settings, user, source):
    """({setting name: base Setting}, provenance, hook) of a replay study; empty for the others."""
    bases, provenance, hook = {}, {}, None
    if spec.source is None:
        return bases, provenance, hook
    make_source = import_object(spec.source, what="replay source")
    for name in settings:
        src = make_source(name, **dict(source or {}))  # ValueError on bad data
        fixed = sorted(set(user) & set(src.fixed_fields))
        if fixed:
            adjustable = [f.name for f in dataclasses.fields(src.setting) if f.name not in src.fixed_fields]
            raise ValueError(f"the setting field(s) {fixed} are fixed by the {study!r} replay (data, or drawn "
                             f"by the environment); adjustable: {adjustable}")
        bases[name], hook = src.setting, src.replicate
        provenance.update(src.provenance)
    return bases, provenance, hook


def _m_grid(spec, name, base, user, m_values):
    """[(M, the cell's overrides)] of one setting, each validated by resolving the setting."""
    default_M = (base or SETTINGS[name]).M
    merged = {**spec.overrides, **user}
    if spec.m_values is not None:
        grid = m_values if m_values is not None else spec.m_values.get(name, (default_M,))
    else:
        grid = (merged.get("M", default_M),)
    result = []
    for M in grid:
        with_m = {**merged, "M": M}
        try:
            resolve_setting(base or name, **with_m)  # validates every field (M an integer too) and combinations
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise ValueError(f"setting {name} with overrides {_compact(with_m)}: {exc}") from None
        with_m["M"] = int(M)
        result.append((int(M), with_m))
    return result


def _compact(overrides: dict) -> str:
    """The overrides for a message: each value cut to a readable length (a 400-digit integer or a
    10,000-character string is named by its size)."""
    shown = []
    for key, value in overrides.items():
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            text = f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
        else:
            text = reprlib.repr(value)
        shown.append(f"{key!r}: {text}")
    return "{" + ", ".join(shown) + "}"
