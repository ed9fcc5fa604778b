"""The ranking-diagram snapshots of a replay study: one replication run in the driver's process
(no Ray), its snapshots stored beside the study's results for :func:`study.results.figures.replay_figures`."""
from __future__ import annotations

import hashlib
import io
import json

import numpy as np

from ..llm.runs import diagram_panels, diagram_times
from ..results import storage
from ..results.figures import DIAGRAMS_FILE, MAX_DIAGRAM_MODELS, diagrams_path


def _fingerprint_sha(plan) -> str:
    return hashlib.sha256(json.dumps(plan.fingerprint(), sort_keys=True, default=str).encode()).hexdigest()


def store_diagram_panels(out, plan, method="RB", log=None, se="model"):
    """Compute and store the ranking-diagram snapshots of ``plan``.

    One ``method`` replication with the seed of replication 0 (the environment every method's
    replication 0 sees): theta(t) and the debiased (theta_d, Phi_11) at t = 200, 400, ..., 1600
    (:func:`study.llm.runs.diagram_times`), Phi_11 the model-based covariance or, with
    ``se="sandwich"``, the sandwich one.  Skipped (returns None) when they are already stored for
    this configuration and ``se`` or the replay has too many models for a diagram; returns the path written."""
    cell = plan.cells[0]
    setting = cell.resolve()
    if cell.base is None or setting.n_items > MAX_DIAGRAM_MODELS:
        return None
    path = diagrams_path(out, plan.study)
    sha = _fingerprint_sha(plan)
    if path.exists():
        with np.load(path, allow_pickle=False) as stored:
            stored_se = str(stored["se_method"]) if "se_method" in stored.files else "model"
            if str(stored["fingerprint_sha256"]) == sha and stored_se == se:
                return None
    seed = plan.seed(cell.setting, 0)
    times = diagram_times(setting.T)
    if log is not None:
        log(f"[{plan.study}] ranking-diagram snapshots: one {method} replication (seed {seed}, T={setting.T}) "
            "in this process")
    point, ci, env = diagram_panels(seed, setting, method, times, replay=plan.replicate, se=se)
    n, d = setting.n_items, setting.dim
    has_ci = np.array([ci[t] is not None for t in times])
    theta_d = np.stack([ci[t][0] if ci[t] is not None else np.zeros((n, d)) for t in times])
    phi11 = np.stack([ci[t][1] if ci[t] is not None else np.zeros((n * d, n * d)) for t in times])
    buffer = io.BytesIO()
    np.savez(buffer, times=np.array(times), point=np.stack([point[t] for t in times]), has_ci=has_ci,
             theta_d=theta_d, phi11=phi11, contexts=np.asarray(env.question_contexts, dtype=float),
             labels=np.array([str(x) for x in getattr(env, "labels", env.models)]), method=np.array(method),
             seed=np.array(seed, dtype=np.int64), T=np.array(setting.T), T0=np.array(setting.T0),
             M=np.array(setting.M), fingerprint_sha256=np.array(sha), se_method=np.array(se))
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.atomic_write_bytes(buffer.getvalue(), path)
    return path


__all__ = ["DIAGRAMS_FILE", "store_diagram_panels"]
