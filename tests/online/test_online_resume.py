"""Opening without replay: a reopened ranker restores the estimator's state from the store's
checkpoint (refitting at most the few tells after it) and continues bit for bit as a ranker that
refitted the whole history, and as an uninterrupted one; read-only opens and ``show`` never fit;
a policy with a state of its own is restored from ``state_dict`` or rebuilt by refitting; a store
of the previous format (written by the code of commit 549859d) is verified, then upgraded once."""
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import study
from study.online import Ranker, snapshot
from study.simulation import estimator

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import online_child  # noqa: E402  (tests/support)

V1_STORE = Path(__file__).resolve().parents[1] / "data" / "online" / "online_v1_549859d.sqlite"
TRUTH = np.array([[0.5, 1.0], [0.0, -0.5], [-0.5, 0.2]])


def judge(ticket) -> int:
    """A simulated judge of Setting-free rankers: BTL with TRUTH, its uniform keyed by the ticket."""
    x = np.asarray(ticket.x)
    p = 1.0 / (1.0 + np.exp(-x @ (TRUTH[ticket.other] - TRUTH[ticket.major])))
    return int(np.random.default_rng([5, ticket.id]).random() < p)


def context(k: int) -> np.ndarray:
    return np.array([1.0, np.sin(k)])


@pytest.fixture
def fits(monkeypatch):
    """Counts the estimator's refits (every Estimate.update)."""
    counter = {"n": 0}
    original = estimator.Estimate.update

    def counted(self, *args, **kwargs):
        counter["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(estimator.Estimate, "update", counted)
    return counter


def capture(ranker) -> bytes:
    return snapshot.capture(ranker._state.estimate)


def continue_both(a, b, start, steps):
    for k in range(start, start + steps):
        ta, tb = a.ask(context(k)), b.ask(context(k))
        assert (ta.id, ta.pair, ta.explored) == (tb.id, tb.pair, tb.explored)
        a.tell(ta, judge(ta))
        b.tell(tb, judge(tb))
        np.testing.assert_array_equal(a.theta, b.theta)


def test_a_reopened_ranker_equals_a_replayed_one_after_10000_tells(tmp_path, fits, monkeypatch):
    path = tmp_path / "r.sqlite"
    with Ranker(path, n_items=3, dim=2, T=10_100, T0=4_000, seed=5) as ranker:
        for start in range(0, 10_000, 50):  # judges reporting in bulk: 50 asks, then one tell_many
            tickets = [ranker.ask(context(k)) for k in range(start, start + 50)]
            assert ranker.tell_many([(t, judge(t)) for t in tickets]) == 50
        assert ranker.n_told == 10_000
    shutil.copy(path, tmp_path / "replayed.sqlite")
    fits["n"] = 0
    reopened = Ranker(path)
    assert fits["n"] == 0  # restored from the checkpoint: nothing refitted
    monkeypatch.setattr(snapshot, "fingerprint", lambda: "other code")  # the checkpoint is not trusted: refit all
    replayed = Ranker(tmp_path / "replayed.sqlite")
    assert fits["n"] == 10_000
    monkeypatch.undo()
    np.testing.assert_array_equal(reopened.theta, replayed.theta)
    assert capture(reopened) == capture(replayed)  # the whole estimator state, byte for byte
    continue_both(reopened, replayed, 10_000, 30)
    assert capture(reopened) == capture(replayed)
    reopened.close()
    replayed.close()


def test_a_reopened_large_ranker_continues_from_its_warm_start_point(tmp_path, fits):
    """A store too large for the reduced design (capacity x (n-1)d > 200,000): stage-2 refits start
    from the last fit's point (newton.Point), whose margins and gradient a reopened ranker rebuilds
    by one pass; it continues byte for byte as the uninterrupted ranker, and as one that refitted."""
    path = tmp_path / "r.sqlite"
    with Ranker(path, n_items=3, dim=2, T=60_000, T0=100, seed=5) as ranker:
        for k in range(400):
            ticket = ranker.ask(context(k))
            ranker.tell(ticket, judge(ticket))
        estimate = ranker._state.estimate
        assert estimate.data.design is None and estimate.reuse_point
        assert estimate.point_beta is not None  # stage 2 keeps the point
    shutil.copy(path, tmp_path / "replayed.sqlite")
    shutil.copy(path, tmp_path / "uninterrupted.sqlite")
    fits["n"] = 0
    reopened = Ranker(path)
    assert fits["n"] == 0 and reopened._state.estimate._point is None  # restored: the cache not yet rebuilt
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshot, "fingerprint", lambda: "other code")
        replayed = Ranker(tmp_path / "replayed.sqlite")
    assert capture(reopened) == capture(replayed)
    continue_both(reopened, replayed, 400, 30)
    assert capture(reopened) == capture(replayed)
    reopened.close()
    replayed.close()


def test_read_only_opens_and_show_never_refit(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    with online_child.create(path, T=150) as ranker:
        online_child.annotate(ranker, online_child.environment(150))
        theta, table = ranker.theta, ranker.ranking()

    def refused(*args, **kwargs):
        raise AssertionError("a refit")

    monkeypatch.setattr(estimator.Estimate, "update", refused)
    with Ranker(path, readonly=True) as reader:
        np.testing.assert_array_equal(reader.theta, theta)
        assert reader.ranking().equals(table) and reader.n_told == 150
    with Ranker(path) as writer:  # a writable open: the checkpoint is of the last tell
        np.testing.assert_array_equal(writer.theta, theta)
    script = ("import sys; from study.simulation import estimator\n"
              "def refused(*a, **k): raise SystemExit('a refit')\n"
              "estimator.Estimate.update = refused\n"
              "from study.online.__main__ import main; sys.exit(main(['show', sys.argv[1], '--no-png']))")
    shown = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "told 150" in shown.stdout, shown.stderr


def tell_btl(ranker, contexts, truth, start, stop):
    """Steps ``start`` to ``stop``: each ticket judged 5 times under BTL with ``truth`` (its draws
    keyed by the step)."""
    for k in range(start, stop):
        ticket = ranker.ask(contexts[k])
        p = 1.0 / (1.0 + np.exp(-contexts[k] @ (truth[ticket.other] - truth[ticket.major])))
        ranker.tell(ticket, int(np.random.default_rng([k]).binomial(5, p)), 5)


def test_the_reopened_ranker_continues_as_an_uninterrupted_one_in_every_regime(tmp_path, fits):
    """n = 31 items, d = 10: 300 parameters, the iterative solver with its kept preconditioner; the
    checkpoint (hundreds of kB) is rewritten every few tells, so reopening refits a few tells."""
    kwargs = dict(n_items=31, dim=10, T=90, T0=40, M=5, seed=3)
    rng = np.random.default_rng(0)
    contexts = np.c_[np.ones(90), rng.normal(0, 0.5, (90, 9))]
    truth = rng.normal(0, 0.3, (31, 10))

    with Ranker(tmp_path / "u.sqlite", **kwargs) as uninterrupted:
        tell_btl(uninterrupted, contexts, truth, 0, 90)
        expected = uninterrupted.theta
    path = tmp_path / "r.sqlite"
    with Ranker(path, **kwargs) as ranker:
        tell_btl(ranker, contexts, truth, 0, 61)
    seq, size = sqlite3.connect(path).execute("SELECT seq, length(state) FROM checkpoint").fetchone()
    assert size > 64 * 1024 and seq <= 61  # a large state: not rewritten with every tell
    fits["n"] = 0
    with Ranker(path) as ranker:
        assert fits["n"] == 61 - seq < -(-size // (64 * 1024))  # the bounded replay
        tell_btl(ranker, contexts, truth, 61, 90)
        np.testing.assert_array_equal(ranker.theta, expected)
    with sqlite3.connect(tmp_path / "u.sqlite") as a, sqlite3.connect(path) as b:
        query = "SELECT id, major, other, explored FROM asks ORDER BY id"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()


@pytest.mark.parametrize("policy,refits", [("online_policies:CountingSaved", 0), ("online_policies:Counting", 40)])
def test_a_policy_with_a_state_is_restored_or_rebuilt(tmp_path, fits, policy, refits):
    kwargs = dict(n_items=3, dim=2, T=80, T0=20, seed=9, policy=policy)
    with Ranker(tmp_path / "u.sqlite", **kwargs) as uninterrupted:
        tickets = []
        for k in range(80):
            tickets.append(uninterrupted.ask(context(k)))
            uninterrupted.tell(tickets[-1], judge(tickets[-1]))
        expected = uninterrupted.theta
    path = tmp_path / "r.sqlite"
    with Ranker(path, **kwargs) as ranker:
        for k in range(40):
            ranker.tell(ranker.ask(context(k)), judge(tickets[k]))
    fits["n"] = 0
    with Ranker(path) as ranker:
        assert fits["n"] == refits
        assert ranker._state.policy.losses == pytest.approx(sum_losses(tickets[:40]))
        for k in range(40, 80):
            ticket = ranker.ask(context(k))
            assert ticket.pair == tickets[k].pair
            ranker.tell(ticket, judge(ticket))
        np.testing.assert_array_equal(ranker.theta, expected)


def sum_losses(tickets):
    losses = [0.0, 0.0, 0.0]
    for t in tickets:
        wins = judge(t)
        losses[t.major] += wins
        losses[t.other] += 1 - wins
    return losses


sha = online_child.sha256


def _only_kernel_rounding(caught) -> None:
    """The stored estimate, computed on another machine, may differ from a refit in its last bits."""
    for warning in caught:
        if "the code of policy 'RB' changed since the store was created" in str(warning.message):
            continue  # the fixture was written by older code: a policy's provenance covers more files since
        gap = float(str(warning.message).split("gave an estimate ")[1].split()[0])
        # the core of 549859d wrote it; the stage-1 fits of this one take another path to the same
        # tie-broken estimates (issue 37: measured 1.7e-10), last bits before that
        assert "BLAS kernel" in str(warning.message) and gap < 1e-8, warning.message


def test_a_store_of_the_previous_format_is_verified_then_upgraded_once(tmp_path, fits):
    """tests/data/online/online_v1_549859d.sqlite: written by the code of commit 549859d (format
    study.online/1: no checkpoint, no store id; Setting A, RB, seed 11, 30 tells, ticket 31 open)."""
    path = tmp_path / "v1.sqlite"
    shutil.copy(V1_STORE, path)
    before = sha(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Ranker(path, readonly=True) as reader:  # nothing written; verified as a writable open verifies it:
            # a format-1 store has no checkpoint, so its history is refitted in memory
            assert reader.n_told == 30 and reader.store_id is None and fits["n"] == 30
            assert reader.pending()[0].id == 31
    _only_kernel_rounding(caught)
    shown = subprocess.run([sys.executable, "-m", "study.online", "verify", str(path)], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and "study.online/1" in shown.stdout and "upgrades it" in shown.stdout
    assert sha(path) == before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = Ranker(path, readonly=True)  # open across the upgrade
    _only_kernel_rounding(caught)
    assert reader.n_told == 30
    fits["n"] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ranker = Ranker(path)
    _only_kernel_rounding(caught)
    assert fits["n"] == 30  # the one refit of the history, in the upgrading transaction
    assert reader.n_told == 30 and reader.store_id == ranker.store_id and fits["n"] == 30  # verified anew (the
    # new checkpoint restored: nothing refitted)
    reader.close()
    with sqlite3.connect(path) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert meta["format"] == "study.online/3" and len(meta["store_id"]) == 32
        assert conn.execute("SELECT seq FROM checkpoint").fetchone() == (30,)
    assert ranker.store_id == meta["store_id"] and ranker.pending()[0].store_id == meta["store_id"]
    online_child.annotate(ranker, online_child.environment())  # tells ticket 31, then asks and tells to T = 60
    np.testing.assert_array_equal(ranker.theta, study.run_replication(online_child.SETTING, "RB",
                                                                      seed=online_child.SEED).theta_final)
    ranker.close()
    fits["n"] = 0
    Ranker(path).close()
    assert fits["n"] == 0
    crafted = tmp_path / "v1_bad.sqlite"
    shutil.copy(V1_STORE, crafted)
    with sqlite3.connect(crafted) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("UPDATE tells SET wins = 21 WHERE seq = 3")
    bad = sha(crafted)
    with pytest.raises(study.online.StoreError, match="tells row 3: wins"):
        Ranker(crafted)
    assert sha(crafted) == bad  # refused before the upgrade


def test_a_checkpoint_of_other_code_is_refitted_once_and_rewritten(tmp_path, fits, monkeypatch):
    path = tmp_path / "r.sqlite"
    with online_child.create(path) as ranker:
        online_child.annotate(ranker, online_child.environment())
        theta = ranker.theta
    monkeypatch.setattr(snapshot, "fingerprint", lambda: "the code after an upgrade")
    fits["n"] = 0
    with Ranker(path) as ranker:
        assert fits["n"] == 60
        np.testing.assert_array_equal(ranker.theta, theta)
    with Ranker(path):
        assert fits["n"] == 60  # the checkpoint was rewritten by the first open: no second refit


def test_a_reopened_ranker_with_the_exact_stage_1_continues_bit_for_bit(tmp_path):
    """``tie_break="exact"``: the shortcut's kept row space (study.core.rowspace) is a cache of the
    told rows, not checkpointed; rebuilt on reopening, the trajectory is the uninterrupted one's."""
    kwargs = dict(n_items=4, dim=3, T=40, T0=30, M=5, seed=7, tie_break="exact")
    rng = np.random.default_rng(2)
    contexts = np.c_[np.ones(40), rng.normal(0, 0.5, (40, 2))]
    truth = rng.normal(0, 0.4, (4, 3))

    with Ranker(tmp_path / "u.sqlite", **kwargs) as uninterrupted:
        tell_btl(uninterrupted, contexts, truth, 0, 40)
        expected = uninterrupted.theta
    path = tmp_path / "r.sqlite"
    with Ranker(path, **kwargs) as ranker:
        tell_btl(ranker, contexts, truth, 0, 7)  # stage 1, theta not identified: the shortcut's regime
        assert getattr(ranker._state.estimate.data, "_row_space", None) is not None
    with Ranker(path) as ranker:
        tell_btl(ranker, contexts, truth, 7, 40)
        np.testing.assert_array_equal(ranker.theta, expected)
