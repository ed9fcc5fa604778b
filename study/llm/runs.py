"""Glue between the LLM replay environments and the core's replication loop, for the Ray job.

* :func:`llm_setting` / :func:`arena_setting` / :func:`byo_setting`: :class:`study.Setting` objects
  whose truth, graph and sizes match the environments (the core's policies read T0, alpha, gamma,
  c_lambda, tie-break and the CI grid from the setting; the environment supplies everything random).
* :func:`replicate`: ``replicate(setting, method, seed) -> ReplicationResult``, the signature of the
  engine's ``replicate`` hook; it builds the environment named by ``setting.name`` ("llm",
  "arena", or "byo" with the file registered by :func:`register_byo`) from ``seed`` and runs
  ``study.run_environment`` on it.  Same seed => same questions, outcome uniforms and theta(0) for
  every method (common random numbers).
* :func:`diagram_panels`: one RB replication with snapshots at t = 200, ..., 1600, returned as the
  panels of :func:`study.llm.diagrams.plot_ranking_diagrams` (point and uncertainty-aware).
"""
from __future__ import annotations

import os

import numpy as np

from .environment import ARENA_M, ARENA_T, LLM_M, LLM_T, INIT_VAR, ArenaReplay, LLMReplay

LLM_T0 = 3000
ARENA_T0 = 4_000
BYO_ENV_VAR = "STUDY_LLM_BYO"
_BYO: dict = {}


def _setting(name, env, T, T0, M, **overrides):
    from study import Setting
    fields = dict(name=name, n_items=env.n_items, dim=env.dim, T=T, T0=T0, M=M, truth=env.theta_star,
                  init_mean=0.0, init_var=INIT_VAR, edges=env.edges, ci_every=0)
    fields.update(overrides)
    return Setting(**fields)


def llm_setting(T: int = LLM_T, T0: int = LLM_T0, M: int = LLM_M, **overrides):
    """The paper's LLM application: T0 = 3000, T = 5000, theta(0) ~ N(0, 5), M = 1."""
    return _setting("llm", LLMReplay(0, T=1, M=M), T, T0, M, **overrides)


def arena_setting(T: int = ARENA_T, T0: int = ARENA_T0, M: int = ARENA_M, **overrides):
    return _setting("arena", ArenaReplay(0, T=1, M=M), T, T0, M, **overrides)


def register_byo(path, *, dim: int = 10, ridge: float = 0.0) -> None:
    """Make ``replicate`` on setting "byo" load ``path`` (also exported as $STUDY_LLM_BYO so that
    Ray workers started afterwards see it)."""
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


def _byo_env(seed, T, M):
    from .byo import load_byo
    opts = _byo_options()
    return load_byo(opts["path"], seed, T=T, M=M, dim=opts["dim"], ridge=opts["ridge"])


def byo_setting(path, T: int = LLM_T, T0: int = LLM_T0, M: int = LLM_M, *, dim: int = 10, ridge: float = 0.0,
                **overrides):
    register_byo(path, dim=dim, ridge=ridge)
    return _setting("byo", _byo_env(0, 1, M), T, T0, M, **overrides)


def make_environment(setting, seed):
    if setting.name == "llm":
        return LLMReplay(seed, T=setting.T, M=setting.M)
    if setting.name == "arena":
        return ArenaReplay(seed, T=setting.T, M=setting.M)
    if setting.name == "byo":
        return _byo_env(seed, setting.T, setting.M)
    raise ValueError(f"no LLM environment for setting {setting.name!r}; expected 'llm', 'arena' or 'byo'")


def replicate(setting, method, seed, **kwargs):
    """Engine hook: one replication of ``method`` on the replay named by ``setting.name``."""
    from study import run_environment
    env = make_environment(setting, seed)
    if not np.allclose(env.theta_star, setting.theta_star_centred) or env.n_items != setting.n_items:
        raise ValueError(f"setting {setting.name!r} does not match its environment (rebuild the setting)")
    record = int(seed) if isinstance(seed, (int, np.integer)) else -1
    return run_environment(env, method, setting, seed=record, **kwargs)


def diagram_panels(seed, setting=None, method: str = "RB", times=tuple(range(200, 1601, 200))):
    """theta(t) and (theta_d(t), Phi_11(t)) at ``times`` of one replication, for the diagrams.
    Returns (point_panels, ci_panels, env); a CI panel is None where the debiased CI is unavailable."""
    setting = setting or llm_setting()
    env = make_environment(setting, seed)
    from study import run_environment
    result = run_environment(env, method, setting, snapshot_times=times)
    point, ci = {}, {}
    for t in times:
        theta, db = result.snapshots[t]
        point[t] = theta
        ci[t] = (db.theta_d, db.phi11) if db is not None and db.available else None
    return point, ci, env
