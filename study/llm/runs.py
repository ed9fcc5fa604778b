"""Glue between the LLM replay environments and the core's replication loop, for the Ray job.

* :func:`llm_setting` / :func:`arena_setting` / :func:`byo_setting`: :class:`study.Setting` objects
  whose truth, graph and sizes match the environments (the core's policies read T0, alpha, gamma,
  c_lambda, tie-break and the CI grid from the setting; the environment supplies everything random,
  theta(0) ~ N(0, 5) included).
* :class:`Replay`: a picklable ``replicate(setting, method, seed) -> ReplicationResult`` (the
  signature of the engine's ``replicate`` hook) for one replay.  For bring-your-own judgments it
  *carries the parsed file* (:class:`ByoData`), so Ray workers on other machines need neither the
  file nor any environment variable: the engine ships the hook to them through the object store.
* :func:`replay_source`: what the engine's ``make_plan`` needs for the studies ``llm``, ``arena``
  and ``byo`` (see :data:`study.runner.STUDIES`): the base setting, the hook, the provenance that
  enters the results' fingerprint (hashes of the replay code and data) and the setting fields a
  user may not override.  It validates a judgments file (``ValueError`` naming row and column).
* :func:`replicate`: module-level hook ("llm", "arena", or "byo" with the file registered by
  :func:`register_byo`); same seed => same questions, outcome uniforms and theta(0) for every method
  (common random numbers).
* :func:`diagram_panels`: one replication with snapshots at t = 200, ..., 1600, returned as the
  panels of :func:`study.llm.diagrams.plot_ranking_diagrams` (point and uncertainty-aware).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util import sha256_files
from ..core.sandwich import check_se, robust
from ..simulation.replication import run_environment
from ..simulation.settings import Setting
from .byo import ByoData, read_byo
from .diagrams import DIAGRAM_TIMES
from .environment import ARENA_M, ARENA_T, LLM_M, LLM_T, INIT_VAR, ArenaReplay, JudgmentReplay, LLMReplay

LLM_T0 = 3000
ARENA_T0 = 4_000
BYO_ENV_VAR = "STUDY_LLM_BYO"
REPLAYS = ("llm", "arena", "byo")
# Setting fields the replays fix (from the data) or ignore (the environment draws contexts,
# graph and theta(0) ~ N(0, 5) itself); everything else (T, T0, M, alpha, gamma, c_lambda,
# tie_break, ci_every, ci_level) may be overridden.
FIXED_FIELDS = ("name", "n_items", "dim", "truth", "edges", "init_mean", "init_var", "p", "context_mean",
                "context_var", "max_graph_draws")
# Modules whose code determines a replay's numbers (with the core, hashed separately by the engine).
_REPLAY_MODULES = ("environment.py", "runs.py", "byo.py", "btl.py", "data.py")
_DATA_FILES = {"llm": ("contexts.csv", "judgments.npz"), "arena": ("arena.npz",)}
_BYO: dict = {}


def _setting(name, env, T, T0, M, **overrides):
    fields = dict(name=name, n_items=env.n_items, dim=env.dim, T=T, T0=T0, M=M, truth=env.theta_star,
                  init_mean=0.0, init_var=INIT_VAR, edges=env.edges, ci_every=0)
    fields.update(overrides)
    return Setting(**fields)


def llm_setting(T: int = LLM_T, T0: int = LLM_T0, M: int = LLM_M, **overrides):
    """The paper's LLM application: T0 = 3000, T = 5000, theta(0) ~ N(0, 5), M = 1."""
    return _setting("llm", LLMReplay(0, T=1, M=M), T, T0, M, **overrides)


def arena_setting(T: int = ARENA_T, T0: int = ARENA_T0, M: int = ARENA_M, **overrides):
    return _setting("arena", ArenaReplay(0, T=1, M=M), T, T0, M, **overrides)


# ---------------------------------------------------------------------------------------------
# Bring your own judgments: parsed once (on the driver), shipped with the hook
# ---------------------------------------------------------------------------------------------

def register_byo(path, *, dim: int = 10, ridge: float = 0.0) -> None:
    """Make the module-level :func:`replicate` on setting "byo" load ``path`` (also exported as
    $STUDY_LLM_BYO for worker processes started afterwards on this machine).  The Ray job does not
    rely on this: it ships a :class:`Replay` that carries the parsed file."""
    _BYO.clear()
    _BYO.update(path=str(path), dim=int(dim), ridge=float(ridge))
    os.environ[BYO_ENV_VAR] = f"{path}|{dim}|{ridge}"


def _byo_options():
    if _BYO:
        return _BYO
    raw = os.environ.get(BYO_ENV_VAR)
    if not raw:
        raise ValueError("setting 'byo' needs a judgments file: call study.llm.runs.register_byo(path)")
    path, dim, ridge = raw.rsplit("|", 2)
    return {"path": path, "dim": int(dim), "ridge": float(ridge)}


_BYO_CACHE: dict = {}


def _registered_byo() -> ByoData:
    opts = _byo_options()
    path = Path(opts["path"])
    key = (str(path), path.stat().st_mtime_ns if path.exists() else None, opts["dim"], opts["ridge"])
    if key not in _BYO_CACHE:
        _BYO_CACHE.clear()
        _BYO_CACHE[key] = read_byo(path, dim=opts["dim"], ridge=opts["ridge"])
    return _BYO_CACHE[key]


def byo_setting(path, T: int = LLM_T, T0: int = LLM_T0, M: int = LLM_M, *, dim: int = 10, ridge: float = 0.0,
                **overrides):
    register_byo(path, dim=dim, ridge=ridge)
    return _setting("byo", _registered_byo().environment(0, T=1, M=M), T, T0, M, **overrides)


# ---------------------------------------------------------------------------------------------
# The engine hook
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Replay:
    """``replicate(setting, method, seed)`` for one replay; picklable, so that the engine can ship
    it to the workers (``byo`` carries its parsed data)."""

    name: str
    byo: ByoData | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.name not in REPLAYS:
            raise ValueError(f"unknown replay {self.name!r}; expected one of {REPLAYS}")

    def environment(self, setting, seed) -> JudgmentReplay:
        if setting.name != self.name:
            raise ValueError(f"the {self.name!r} replay cannot run setting {setting.name!r}")
        if self.name == "llm":
            return LLMReplay(seed, T=setting.T, M=setting.M)
        if self.name == "arena":
            return ArenaReplay(seed, T=setting.T, M=setting.M)
        data = self.byo if self.byo is not None else _registered_byo()
        return data.environment(seed, T=setting.T, M=setting.M)

    def __call__(self, setting, method, seed, **kwargs):
        env = self.environment(setting, seed)
        if env.n_items != setting.n_items or not np.allclose(env.theta_star, setting.theta_star_centred):
            raise ValueError(f"setting {setting.name!r} does not match its environment (rebuild the setting)")
        record = int(seed) if isinstance(seed, (int, np.integer)) else -1
        return run_environment(env, method, setting, seed=record, **kwargs)


def make_environment(setting, seed):
    if setting.name not in REPLAYS:
        raise ValueError(f"no LLM environment for setting {setting.name!r}; expected 'llm', 'arena' or 'byo'")
    return Replay(setting.name).environment(setting, seed)


def replicate(setting, method, seed, **kwargs):
    """Engine hook: one replication of ``method`` on the replay named by ``setting.name``."""
    if setting.name not in REPLAYS:
        raise ValueError(f"no LLM environment for setting {setting.name!r}; expected 'llm', 'arena' or 'byo'")
    return Replay(setting.name)(setting, method, seed, **kwargs)


# ---------------------------------------------------------------------------------------------
# What the engine needs to plan a replay study
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ReplaySource:
    setting: object  # the base study.Setting (paper defaults; overrides are applied by the engine)
    replicate: Replay
    provenance: dict  # enters the results' fingerprint
    fixed_fields: tuple = FIXED_FIELDS


def replay_code_hash() -> str:
    """SHA-256 of the replay modules (environment, hook, BYO reader, BT fit, loaders)."""
    root = Path(__file__).resolve().parent
    return sha256_files(root / name for name in _REPLAY_MODULES)


def replay_source(name: str, *, judgments=None, dim: int = 10, ridge: float = 0.0, embedder=None) -> ReplaySource:
    """Base setting, hook and provenance of replay ``name`` ("llm", "arena", "byo"; ``byo`` needs
    ``judgments``, the path of a judgments file, which is read and validated here)."""
    if name not in REPLAYS:
        raise ValueError(f"unknown replay {name!r}; expected one of {REPLAYS}")
    provenance = {"replay": name, "replay_code_sha256": replay_code_hash()}
    if name == "byo":
        if judgments is None:
            raise ValueError("the 'byo' replay needs a judgments file (--judgments PATH)")
        data = read_byo(judgments, dim=dim, ridge=ridge, embedder=embedder)
        hook = Replay("byo", data)
        # the stage-1 radius must contain theta*: the paper's 5, or the largest item norm rounded up
        norm = float(np.linalg.norm(data.theta_star - data.theta_star.mean(axis=0), axis=1).max())
        base = _setting("byo", data.environment(0, T=1), LLM_T, LLM_T0, LLM_M, gamma=max(5.0, float(np.ceil(norm))))
        provenance.update(judgments_sha256=data.sha256, ridge=data.ridge, n_models=len(data.models),
                          n_questions=len(data.question_ids), n_judgments=int(data.counts.sum()))
        if data.embedded:
            provenance.update(embedding_dim=data.dim)
    else:
        if judgments is not None:
            raise ValueError(f"a judgments file applies to the 'byo' replay only, not {name!r}")
        root = Path(__file__).resolve().parent / "data"
        provenance["data_sha256"] = sha256_files(root / f for f in _DATA_FILES[name])
        base = llm_setting() if name == "llm" else arena_setting()
        hook = Replay(name)
    return ReplaySource(setting=base, replicate=hook, provenance=provenance)


# ---------------------------------------------------------------------------------------------
# Ranking-diagram snapshots
# ---------------------------------------------------------------------------------------------

def diagram_times(T: int, times=DIAGRAM_TIMES) -> tuple:
    """The paper's t = 200, ..., 1600 up to T; for a short run (fewer than two of them fit) eight
    equally spaced times up to T instead."""
    kept = tuple(t for t in times if t <= T)
    if len(kept) >= 2:
        return kept
    return tuple(sorted({max(1, round(T * k / 8)) for k in range(1, 9)}))


def diagram_panels(seed, setting=None, method: str = "RB", times=DIAGRAM_TIMES, replay: Replay | None = None,
                   se: str = "model"):
    """theta(t) and (theta_d(t), Phi_11(t)) at ``times`` of one replication, for the diagrams.
    Returns (point_panels, ci_panels, env); a CI panel is None where the debiased CI is unavailable.
    ``se="sandwich"`` gives the sandwich covariance instead of Phi_11 (:mod:`study.core.sandwich`),
    from the replication's rows with their ties (the replay's draws, recomputed)."""
    se = check_se(se)
    setting = setting or llm_setting()
    replay = replay or Replay(setting.name)
    times = tuple(int(t) for t in times)
    if any(not 1 <= t <= setting.T for t in times):
        raise ValueError(f"diagram times must lie in [1, T={setting.T}], got {list(times)}")
    env = replay.environment(setting, seed)
    result = run_environment(env, method, setting, snapshot_times=times)
    point, ci = {}, {}
    rows = _told_rows(env, result, max(times)) if se == "sandwich" else None
    for t in times:
        theta, db = result.snapshots[t]
        point[t] = theta
        if se == "sandwich" and db is not None and db.available:
            db = robust(db, theta, *(column[:t] for column in rows))
        ci[t] = (db.theta_d, db.phi11) if db is not None and db.available else None
    return point, ci, env


def _told_rows(env, result, T):
    """(i, j, X, score, m, ties) of a replay replication's first T steps (ties recounted from the draws;
    score = outright wins + ties / 2, as the estimator's rows count them)."""
    major, other = result.trajectory["major"][:T], result.trajectory["other"][:T]
    codes = np.stack([env.draw(t, a, b) for t, (a, b) in enumerate(zip(major, other), start=1)])
    ties = (codes == 2).sum(axis=1).astype(float)
    wins = (codes == 1).sum(axis=1) + 0.5 * ties
    return (major.astype(np.intp), other.astype(np.intp), np.asarray(env.contexts[:T], dtype=float), wins,
            np.full(T, float(env.M)), ties)
