"""Two writers on one store leave a store that ``verify --replay`` accepts, bit for bit: a writer
that follows the other's tells restores its checkpoint onto an estimator that has fitted rows of
its own, and the warm-start cache of its own last fit (``Estimate._point``, not part of a
checkpoint) used to survive the restore, so that its next fit started elsewhere than the
uninterrupted history's (same estimate to 1e-9, another Newton path: `verify --replay` refused the
store although the estimate equalled a full refit to rounding)."""
import sqlite3

import numpy as np

from study.core.threads import one_blas_thread
from study.online import Ranker, snapshot, verify_store
from study.online.state import LoopState
from study.online.verify import open_store

SKILL = np.array([1.0, 0.5, 0.0, -0.5, -1.0])


def alternate(path, tells=120, every=3):
    rng = np.random.default_rng(1)
    first = Ranker(path, n_items=5, dim=3, T=2000, T0=60, seed=3)
    second = Ranker(path)
    writers = (first, second)
    for k in range(tells):
        ticket = writers[(k // 7) % 2].ask(np.r_[1.0, rng.normal(0, 0.3, 2)])
        p_other = 1 / (1 + np.exp(SKILL[ticket.major] - SKILL[ticket.other]))
        writers[(k // every) % 2].tell(ticket.id, int(rng.random() < p_other))
    theta = first.theta
    first.close()
    second.close()
    return theta


def test_two_writers_leave_a_store_that_replays_bit_for_bit(tmp_path):
    path = tmp_path / "two.sqlite"
    theta = alternate(path)  # through stage 1 (T0 = 60) into stage 2
    summary = verify_store(path, replay=True)
    assert summary["replayed"]

    with sqlite3.connect(path) as conn:
        opened = open_store(conn, path)
    whole = LoopState(opened.config, None)
    with one_blas_thread():  # as every fit of the ranker and of verify
        whole.fit(opened.ledger, opened.ledger.n_tells)
    np.testing.assert_array_equal(whole.estimate.theta, theta)


def test_a_checkpoint_restored_onto_a_used_estimator_continues_as_the_uninterrupted_one(tmp_path):
    path = tmp_path / "one.sqlite"
    alternate(path, tells=50, every=1000)  # one writer: the reference history

    with sqlite3.connect(path) as conn:
        opened = open_store(conn, path)
    ledger = opened.ledger
    reference = LoopState(opened.config, None)
    with one_blas_thread():
        reference.fit(ledger, 30)
        blob = snapshot.capture(reference.estimate)
        reference.fit(ledger, 50)
    used = LoopState(opened.config, None)
    with one_blas_thread():
        used.fit(ledger, 20)  # a writer that told rows 1..20, then follows the other's checkpoint at 30
        used.restore(path, ledger, 30, blob)
        used.fit(ledger, 50)
    np.testing.assert_array_equal(used.estimate.theta, reference.estimate.theta)
    assert used.estimate.newton_steps == reference.estimate.newton_steps
