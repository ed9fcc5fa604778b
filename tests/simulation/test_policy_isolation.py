"""User code cannot reach the stored results (issue 18, item 3): whatever a policy does to what a
step hands it -- the context, theta(t-1), the debiased result, the graph -- a write raises (so
that a policy checker can name it) and the replication's numbers are those of a well-behaved
policy, value for value."""
from __future__ import annotations

import numpy as np
import pytest

import study
from study.policies import make_policy

RUN = dict(T=150, T0=40, ci_every=10)  # the debiased CI exists from t ~ 100 (Setting A)


class Meddler:
    """RB, except that every step it tries every way of writing into what the step hands it and
    records which ones got through."""

    got_through: list = []
    refused: list = []

    def __init__(self, setting):
        self.inner = make_policy("RB", setting)

    def _try(self, label, action):
        try:
            action()
        except (ValueError, TypeError, AttributeError) as exc:
            type(self).refused.append((label, str(exc)))
        else:
            type(self).got_through.append(label)

    def select(self, step):
        db = step.debiased()

        def scale_x():
            step.x *= 10.0

        def flip_x():
            step.x.flags.writeable = True
            step.x[:] = -step.x

        def via_base_x():
            base = step.x.base
            base.flags.writeable = True
            base[...] = base * 10.0

        def flip_theta():
            step.theta.flags.writeable = True
            step.theta[:] = 0.0

        def write_theta_d():
            db.theta_d[...] = 123.0

        def flip_theta_d():
            db.theta_d.flags.writeable = True
            db.theta_d[...] = 123.0

        def via_base_theta_d():
            base = db.theta_d.base
            base.flags.writeable = True
            base[...] = 123.0

        def write_cov():
            db.cov[...] = 0.0  # computed on demand in the policy's copy

        def write_factor():
            db.factor[...] = 1.0

        def flip_adjacency():
            step.graph.adjacency.flags.writeable = True
            step.graph.adjacency[...] = True

        for label, action in (("x *= 10", scale_x), ("x flag", flip_x), ("x base", via_base_x),
                              ("theta flag", flip_theta), ("theta_d write", write_theta_d),
                              ("theta_d flag", flip_theta_d), ("theta_d base", via_base_theta_d),
                              ("cov write", write_cov), ("factor write", write_factor),
                              ("adjacency flag", flip_adjacency)):
            if label.startswith(("theta_d", "cov", "factor")) and not db.available:
                continue
            self._try(label, action)
        return self.inner.select(step)


@pytest.mark.parametrize("setting, seed", [("A", 3), ("A", 8)])
def test_a_policy_that_writes_into_its_step_changes_nothing_stored(setting, seed):
    Meddler.got_through, Meddler.refused = [], []
    meddled = study.run_replication(setting, "meddler", seed, policy=Meddler, **RUN)
    plain = study.run_replication(setting, "RB", seed, **RUN)
    # the only writes that "got through" are into the policy's own private copies ...
    assert set(Meddler.got_through) <= {"x base", "theta_d base"}, Meddler.got_through
    # ... the plain writes raise a clear error, a policy checker can name them ...
    refused = dict(Meddler.refused)
    assert "read-only" in refused["x *= 10"] and "read-only" in refused["theta_d write"]
    assert "WRITEABLE" in refused["x flag"] and "WRITEABLE" in refused["theta flag"]
    # ... and none reaches the loop: the trajectory and the intervals are RB's, value for value
    frames, expected = meddled.to_frame(), plain.to_frame()
    for what in ("trajectory", "intervals"):
        # (before_phi records that the meddler asks for the debiased estimate, which RB never does)
        drop = ["method", "before_phi"]
        a, b = frames[what].drop(columns=drop, errors="ignore"), expected[what].drop(columns=drop, errors="ignore")
        assert len(b) > 0
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert not (frames["trajectory"]["regret"] < -1e-12).any()


def test_a_shared_debiased_result_is_not_rewritten_through_the_policy():
    """The issue's case: a policy writes into step.debiased() in place, and the CI grid had
    already recorded that result (it is computed at the end of step t-1 and shared)."""

    class Overwrite:
        def __init__(self, setting):
            self.inner = make_policy("RB", setting)

        def select(self, step):
            db = step.debiased()
            if db.available:
                try:
                    db.theta_d += 100.0
                except ValueError:
                    pass
            return self.inner.select(step)

    meddled = study.run_replication("A", "overwrite", 5, policy=Overwrite, **RUN).to_frame()["intervals"]
    plain = study.run_replication("A", "RB", 5, **RUN).to_frame()["intervals"]
    assert len(plain) > 0
    np.testing.assert_array_equal(meddled["estimate"].to_numpy(), plain["estimate"].to_numpy())


@pytest.mark.parametrize("args", [(True, False), (0, True), (1.0, 2), ("0", 1), (0, 1, "yes")])
def test_choice_refuses_what_is_not_an_item(args):
    with pytest.raises(TypeError, match="Choice"):
        study.Choice(*args)
    assert study.Choice(np.int64(2), 3, np.bool_(True)) == (2, 3, True)


def test_loop_refuses_a_bool_item_in_a_plain_tuple():
    class Bools:
        def __init__(self, setting):
            pass

        def select(self, step):
            return (True, False, False)

    with pytest.raises(ValueError, match="expected a Choice"):
        study.run_replication("A", "bools", 0, T=5, T0=2, edges=[(0, 1), (1, 2), (2, 3), (3, 4)], policy=Bools)
