"""Capture stage-1 problems for tests/core/test_nearest.py (not a test: run it to regenerate).

    python tests/core/stage1_capture.py     # writes tests/data/stage1_problems.npz

The problems are the refits of stage 1 (``opt1``: L over the sum-zero gamma-balls) of one RB
replication of Settings A and B (seed 1, T = T0 = 200, the paper's n and d), at the steps in
``STEPS``: the rows up to step t, theta(t-1) (the reference, and the refit's start) and the
multipliers handed to the refit.  They cover theta identified by the data and not, with and
without balls active at the estimate, and near-separable steps where the argmin set is a thin
sliver of the balls (the nearest point is ill-conditioned there: ``CONDITIONED`` lists the others).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

STEPS = {"A": (0, 2, 8, 15, 45, 120), "B": (0, 5, 20, 40, 80, 120)}
OUT = ROOT / "tests" / "data" / "stage1_problems.npz"


def capture() -> dict:
    import study.simulation.estimator as estimator
    from study.simulation.replication import run_replication

    arrays = {}
    original = estimator.solve
    for name, steps in STEPS.items():
        seen = []

        def recording(data, theta, **kw):
            if kw.get("radius") is not None:
                t = data.t
                seen.append(dict(a=data.a[:t].copy(), b=data.b[:t].copy(), X=data.X[:t].copy(),
                                 wins=data.wins[:t].copy(), m=data.m[:t].copy(), n=np.array(data.n_items),
                                 reference=theta.copy(), radius=np.array(kw["radius"]),
                                 multipliers=np.zeros(data.n_items) if kw.get("multipliers") is None
                                 else np.asarray(kw["multipliers"], float).copy()))
            return original(data, theta, **kw)

        estimator.solve = recording
        try:
            run_replication(name, "RB", 1, T=200, T0=200, ci_every=0)
        finally:
            estimator.solve = original
        for step in steps:
            for key, value in seen[step].items():
                arrays[f"{name}{step}_{key}"] = value
    return arrays


if __name__ == "__main__":
    np.savez_compressed(OUT, **capture())
    print(OUT, OUT.stat().st_size, "bytes")
