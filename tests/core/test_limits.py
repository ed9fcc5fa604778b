"""The replication cost model follows n, d and T, and sizes out of reach are refused when the
setting is built (before any work or Ray task), with the estimate in the message."""
from __future__ import annotations

import pytest

import study
from study.core.limits import MEMORY_LIMIT_BYTES, replication_cost


def test_cost_grows_with_every_size():
    for base, bigger in (((100, 10, 2000), (1000, 10, 2000)), ((100, 10, 2000), (100, 10, 10_000)),
                         ((100, 5, 2000), (100, 10, 2000))):
        (m0, s0), (m1, s1) = replication_cost(*base), replication_cost(*bigger)
        assert m1 > m0 and s1 > s0, (base, bigger)
    # the estimate of issue 18 no longer stays flat in n (it gave 6.1 MB for every n from 100 to 10^6)
    memories = [replication_cost(n, 10, 500)[0] for n in (100, 1000, 10_000, 100_000)]
    assert all(b > 2 * a for a, b in zip(memories, memories[1:]))


def test_twenty_thousand_items_are_refused_before_any_work():
    with pytest.raises(ValueError, match=r"n_items=20000.*GiB of memory.*CPU-hours") as info:
        study.SETTINGS["B"].replace(n_items=20_000, truth="normal", p="2log(n)/n")
    memory, _ = replication_cost(20_000, 10, 500)
    assert memory > MEMORY_LIMIT_BYTES and f"{memory / 2 ** 30:.3g} GiB" in str(info.value)


def test_the_long_horizon_targets_are_within_reach():
    for n, d, T in ((10, 10, 2000), (100, 10, 2000), (1000, 10, 2000), (100, 10, 10_000), (50, 10, 5000)):
        memory, seconds = replication_cost(n, d, T)
        assert memory < 2 ** 30 and seconds < 3600, (n, d, T, memory, seconds)
