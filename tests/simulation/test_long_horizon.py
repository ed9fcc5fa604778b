"""The long-horizon setting family "L" and its T0 rule."""
from __future__ import annotations

import pytest

import study


def test_long_horizon_family_follows_its_t0_rule():
    long = study.SETTINGS["L"]
    assert (long.n_items, long.dim, long.T, long.T0) == (100, 10, 10_000, 4000)
    sized = long.replace(n_items=50, T=5000)
    assert sized.T0 == 2000 and sized.T0_rule == "0.4T"
    explicit = long.replace(T=5000, T0=300)  # an explicit T0 drops the rule
    assert explicit.T0 == 300 and explicit.T0_rule is None
    assert study.SETTINGS["A"].replace(T=1000, T0_rule="0.25T").T0 == 250
    assert study.SETTINGS["A"].T0 == 200 and study.SETTINGS["A"].T0_rule is None


@pytest.mark.parametrize("rule", ["0.4", "T/2", "1.5T", -0.1])
def test_bad_t0_rules_are_refused(rule):
    with pytest.raises(ValueError, match="T0_rule"):
        study.SETTINGS["L"].replace(T0_rule=rule)


def test_a_short_long_horizon_replication_runs():
    result = study.run_replication("L", "RB", seed=2, n_items=12, T=60, ci_every=20)
    assert result.trajectory["t"][-1] == 60 and result.setting.T0 == 24
