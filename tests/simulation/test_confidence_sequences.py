"""The intervals frame's confidence sequences are the debiased result's (``DebiasResult.cs``, tightest
at t = T) at every CI grid time, contain the fixed-time CIs, and say whether they cover."""
import numpy as np

import study


def test_recorded_sequences_are_the_debiased_results():
    T, M = 150, 20
    grid = range(10, T + 1, 10)
    r = study.run_replication("A", "RB", seed=3, T=T, T0=60, ci_every=10, snapshot_times=grid)
    frame = r.to_frame()["intervals"]
    assert {"cs_lower", "cs_upper", "cs_covered"} <= set(frame.columns) and len(frame)
    for t, rows in frame.groupby("t"):
        result = r.snapshots[t][1]
        assert result.comparisons == t * M
        lower, upper = result.cs(0.95, tightest_at=T * M)
        np.testing.assert_array_equal(rows["cs_lower"].to_numpy(), lower.ravel())
        np.testing.assert_array_equal(rows["cs_upper"].to_numpy(), upper.ravel())
    assert (frame.cs_lower < frame.lower).all() and (frame.cs_upper > frame.upper).all()
    inside = (frame.cs_lower <= frame.truth) & (frame.truth <= frame.cs_upper)
    np.testing.assert_array_equal(frame.cs_covered.to_numpy(), inside.to_numpy())
    assert (frame.cs_covered | ~frame.covered).all()  # a CI that covers implies its sequence does
