"""The ranker's SQLite store: a kill -9 loses nothing told and the reopened ranker continues
exactly; two processes telling into one file lose nothing; bad input is refused with a clear
message and changes nothing in the store; reopening with other arguments is refused naming them;
tickets told late or expired; ``python -m study.online show``."""
import os
import signal
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import study
from study.online import Ranker, StoreError, Ticket

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import online_child  # noqa: E402  (tests/support)


def child(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, str(SUPPORT / "online_child.py"), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


dump = online_child.dump


@pytest.fixture(scope="module")
def uninterrupted():
    """The simulated replication the child's annotation loop reproduces."""
    return study.run_replication(online_child.SETTING, "RB", seed=online_child.SEED)


def assert_continues_exactly(path, result):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the replayed estimate must equal the stored one
        ranker = Ranker(path)
    online_child.annotate(ranker, online_child.environment())
    with sqlite3.connect(path) as conn:
        asks = conn.execute("SELECT major, other, status FROM asks ORDER BY id").fetchall()
        order = [row[0] for row in conn.execute("SELECT ask_id FROM tells ORDER BY seq")]
    assert [a[:2] for a in asks] == list(zip(result.trajectory["major"], result.trajectory["other"]))
    assert {a[2] for a in asks} == {"told"} and order == list(range(1, result.setting.T + 1))
    np.testing.assert_array_equal(ranker.theta, result.theta_final)
    ranker.close()


def test_kill_9_in_a_running_loop_loses_nothing_told(tmp_path, uninterrupted):
    path = tmp_path / "r.sqlite"
    proc = child("loop", path)
    told = 0
    for line in proc.stdout:
        told = int(line.split()[1])
        if told >= 25:
            break
    os.kill(proc.pid, signal.SIGKILL)  # wherever it is: between, inside an ask or inside a tell
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with Ranker(path, readonly=True) as ranker:
        assert ranker.n_told >= told  # every acknowledged tell is there
        assert ranker.n_asked - ranker.n_told <= 1
    assert_continues_exactly(path, uninterrupted)


@pytest.mark.parametrize("mode", ["hang-tell", "hang-ask"])
def test_kill_9_inside_a_transaction_leaves_no_trace(tmp_path, uninterrupted, mode):
    path = tmp_path / "r.sqlite"
    proc = child(mode, path, 20)
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith("hanging"):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lines[-1] == "hanging 20", proc.stderr.read()
    with Ranker(path, readonly=True) as ranker:
        assert ranker.n_told == 19  # tell 20 (or ask 20) was never committed
        assert ranker.n_asked == (20 if mode == "hang-tell" else 19)
        assert [t.id for t in ranker.pending()] == ([20] if mode == "hang-tell" else [])
    assert_continues_exactly(path, uninterrupted)


def test_two_processes_telling_into_one_file_lose_nothing(tmp_path):
    path, start = tmp_path / "r.sqlite", tmp_path / "start"
    T = 160
    env = online_child.environment(T)
    s = online_child.SETTING
    Ranker(path, n_items=s.n_items, dim=s.dim, T=T, T0=60, M=s.M, edges=env.edges, theta0=env.theta0,
           seed=3).close()
    writers = [child("writer", path, name, 40, start) for name in ("a", "b")]
    assert [w.stdout.readline().strip() for w in writers] == ["ready", "ready"]  # both open: start together
    start.touch()
    outputs = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], [o[1][-2000:] for o in outputs]
    ids = {name: [int(v) for line in out.splitlines() for v in line.split()[1:]] for name, (out, _) in
           zip("ab", outputs)}
    assert sorted(ids["a"] + ids["b"]) == list(range(1, T + 1))  # every ticket handed to exactly one writer
    assert max(ids["a"]) > min(ids["b"]) and max(ids["b"]) > min(ids["a"])  # they wrote at the same time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ranker = Ranker(path, readonly=True)
    counts = ranker.counts()
    assert counts["told"] == T and counts["open"] == 0 and counts["comparisons"] == T * s.M
    with sqlite3.connect(path) as conn:
        seqs = [row[0] for row in conn.execute("SELECT seq FROM tells ORDER BY seq")]
        stored = np.frombuffer(conn.execute("SELECT theta FROM estimate").fetchone()[0], "<f8")
    assert seqs == list(range(1, T + 1))
    np.testing.assert_array_equal(ranker.theta.ravel(), stored)  # replayed from the file = the writers' estimate
    ranker.close()


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "r.sqlite"
    ranker = Ranker(path, n_items=4, dim=2, T=30, M=3, seed=1, edges=[(0, 1), (1, 2), (2, 3), (0, 3)],
                    items=["a", "b", "c", "d"])
    told = ranker.ask([1.0, 0.5])
    ranker.tell(told, wins=2, m=3)
    expired = ranker.ask([1.0, -0.5])
    ranker.expire(expired)
    open_ = ranker.ask([1.0, 0.0])
    yield path, ranker, told, expired, open_
    ranker.close()


def test_bad_input_is_refused_and_changes_nothing(small):
    path, ranker, told, expired, open_ = small
    non_edge = Ticket(**{**vars(open_), "major": 0, "other": 2})
    wrong_pair = Ticket(**{**vars(open_), "major": 3, "other": 0}) if open_.pair != (3, 0) else \
        Ticket(**{**vars(open_), "major": 2, "other": 1})
    cases = [
        (lambda: ranker.ask([1.0, 2.0, 3.0]), r"x must have shape \(2,\)"),
        (lambda: ranker.ask([1.0, np.nan]), "x contains NaN or inf"),
        (lambda: ranker.ask([np.inf, 1.0]), "x contains NaN or inf"),
        (lambda: ranker.ask(["one", "two"]), "x must be numeric"),
        (lambda: ranker.tell(99, 1), "ticket 99 was never asked"),
        (lambda: ranker.tell(Ticket(**{**vars(open_), "id": 99}), 1), "ticket 99 was never asked"),
        (lambda: ranker.tell(Ticket(**{**vars(open_), "other": 7}), 1), r"unknown pair \(\d, 7\)"),
        (lambda: ranker.tell(non_edge, 1), r"unknown pair \(0, 2\)"),
        (lambda: ranker.tell(wrong_pair, 1), f"ticket {open_.id} is for the pair"),
        (lambda: ranker.tell(open_, 4), r"wins \+ ties = 4 \+ 0 exceeds m = 3"),
        (lambda: ranker.tell(open_, 2, ties=2), r"wins \+ ties = 2 \+ 2 exceeds m = 3"),
        (lambda: ranker.tell(open_, 1, m=4), "m = 4 exceeds M = 3"),
        (lambda: ranker.tell(open_, 0, m=0), "m must be an integer >= 1"),
        (lambda: ranker.tell(open_, -1), "wins must be an integer >= 0"),
        (lambda: ranker.tell(open_, 0.5), "wins must be an integer >= 0, got 0.5"),
        (lambda: ranker.tell(open_, np.nan), "wins must be an integer"),
        (lambda: ranker.tell(open_, 1, ties=-1), "ties must be an integer >= 0"),
        (lambda: ranker.tell(told, 1), f"ticket {told.id} was already told"),
        (lambda: ranker.tell(expired, 1), f"ticket {expired.id} was already expired"),
        (lambda: ranker.expire(told), f"ticket {told.id} is already told"),
        (lambda: ranker.expire(), "give either a ticket or older_than"),
        (lambda: Ranker(path, T=29), r"created with other arguments: T: stored 30, given 29"),  # (a larger T raises it)
        (lambda: Ranker(path, policy="TS", M=2), r"policy: stored 'RB', given 'TS'; M: stored 3, given 2"),
        (lambda: Ranker(path, items=["a", "b", "c", "e"]), r"items: stored \('a', 'b', 'c', 'd'\)"),
        (lambda: Ranker(path, seed=2), "seed: stored"),
        (lambda: Ranker(path, readonly=True).ask([1.0, 0.0]), "open read-only"),
    ]
    before = dump(path)
    theta = ranker.theta
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
        assert dump(path) == before, message
    np.testing.assert_array_equal(ranker.theta, theta)
    # and the ranker works on: the open ticket is told, the next ask continues
    ranker.tell(open_, 1, ties=1)
    assert ranker.n_told == 2 and ranker.ask([1.0, 0.1]).id == 4


def test_creation_with_bad_arguments_leaves_no_file(tmp_path):
    path = tmp_path / "new.sqlite"
    for kwargs, message in [({"dim": 2}, "needs n_items"),
                            ({"n_items": 3, "dim": 2, "policy": "nope"}, "unknown method"),
                            ({"n_items": 3, "dim": 2, "T0": 50, "T": 10}, "T0 must lie in"),
                            ({"n_items": 3, "dim": 2, "edges": [(0, 1)]}, "not form a connected graph"),
                            ({"n_items": 3, "dim": 2, "theta0": np.zeros((2, 2))}, "theta0 must have shape")]:
        with pytest.raises(ValueError, match=message):
            Ranker(path, **kwargs)
        assert not path.exists()
    (tmp_path / "foreign.txt").write_text("not a database")
    with pytest.raises(StoreError, match="not a ranker store"):
        Ranker(tmp_path / "foreign.txt", n_items=3, dim=1)
    with pytest.raises(StoreError, match="no such ranker store"):
        Ranker(tmp_path / "missing.sqlite", readonly=True)


def test_tickets_told_late_expire_and_reopen_with_the_stored_arguments(small):
    path, ranker, told, expired, open_ = small
    later = ranker.ask([1.0, 0.3])
    assert [t.id for t in ranker.pending()] == [open_.id, later.id]
    ranker.tell(later, 3)  # told before the earlier ticket: it becomes row 2 of the estimate
    ranker.tell(open_.id, 0, ties=1)
    assert ranker.pending() == [] and ranker.n_told == 3
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT ask_id FROM tells ORDER BY seq").fetchall() == [(told.id,), (later.id,),
                                                                                    (open_.id,)]
    stale = ranker.ask([1.0, 0.0])
    assert ranker.expire(older_than=3600) == 0 and ranker.expire(older_than=0) == 1
    with pytest.raises(ValueError, match=f"ticket {stale.id} was already expired"):
        ranker.tell(stale, 1)
    theta = ranker.theta
    with Ranker(path, n_items=4, M=3, items=["a", "b", "c", "d"]) as again:  # the stored values: accepted
        np.testing.assert_array_equal(again.theta, theta)
        assert again.config.T == 30 and again.counts() == {"open": 0, "told": 3, "expired": 2, "asked": 5,
                                                             "comparisons": 9, "ties": 1}


def test_show_prints_counts_and_the_ranking_and_draws_the_diagram(tmp_path):
    path = tmp_path / "r.sqlite"
    with online_child.create(path, T=150) as ranker:
        online_child.annotate(ranker, online_child.environment(150))
    png = tmp_path / "d.png"
    out = subprocess.run([sys.executable, "-m", "study.online", "show", str(path), "--se", "sandwich", "--png",
                          str(png)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "asked 150: told 150, open 0, expired 0; 3000 comparisons told, 0 of them ties" in out.stdout
    assert "sandwich SE" in out.stdout and "rank" in out.stdout
    assert png.stat().st_size > 1000 and "uncertainty-aware" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "study.online", "show", str(tmp_path / "none.sqlite")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no such ranker store" in bad.stderr


def test_ranking_intervals_and_diagram_state_their_standard_errors(tmp_path):
    path = tmp_path / "r.sqlite"
    with online_child.create(path, T=150) as ranker:
        with pytest.raises(ValueError, match="not available yet"):
            ranker.intervals()
        online_child.annotate(ranker, online_child.environment(150))
        model, robust = ranker.intervals(), ranker.intervals(se="sandwich")
        assert set(model.se_method) == {"model"} and set(robust.se_method) == {"sandwich"}
        np.testing.assert_array_equal(model.estimate, robust.estimate)
        # Bernoulli judgments: the two agree roughly (they are different estimates of one variance)
        assert 0.7 < np.median(robust.se / model.se) < 1.3
        table = ranker.ranking(se="sandwich")
        assert list(table["rank"]) == [1, 2, 3, 4, 5] and table.attrs["se_method"] == "sandwich"
        assert np.all(np.diff(table["score"]) <= 0)
        adjacency = ranker.diagram(online_child.environment().contexts, tmp_path / "d.png", se="sandwich")
        assert adjacency.shape == (5, 5) and (tmp_path / "d.png").exists()


def test_a_ticket_of_another_store_is_refused(tmp_path):
    """Issue 25's case: ticket 1 of b.sqlite (context (1, -3)) told into a.sqlite, whose ticket 1 is
    for the same pair (context (1, 0.5)), was recorded under a's context; the store ids tell them apart."""
    kwargs = dict(n_items=2, dim=2, T=20, seed=1)
    with Ranker(tmp_path / "a.sqlite", **kwargs) as a, Ranker(tmp_path / "b.sqlite", **kwargs) as b:
        mine, foreign = a.ask([1.0, 0.5]), b.ask([1.0, -3.0])
        assert (mine.id, mine.pair) == (foreign.id, foreign.pair) and mine.store_id != foreign.store_id
        before = dump(tmp_path / "a.sqlite")
        with pytest.raises(ValueError, match=f"ticket 1 was handed out by another store \\(store id "
                                             f"{foreign.store_id}\\), not by .*a.sqlite"):
            a.tell(foreign, 1)
        with pytest.raises(ValueError, match="outcome 1: ticket 1 was handed out by another store"):
            a.tell_many([(mine, 0), (foreign, 1)])
        with pytest.raises(ValueError, match="handed out by another store"):
            a.expire(foreign)
        with pytest.raises(ValueError, match="ticket 1 carries no store id"):
            a.tell(Ticket(**{**vars(mine), "store_id": None}), 1)
        assert dump(tmp_path / "a.sqlite") == before
        a.tell(mine, 1)
        assert a.pending() == [] and [t.store_id for t in b.pending()] == [b.store_id]
    (tmp_path / "a.sqlite").unlink()
    with Ranker(tmp_path / "a.sqlite", **kwargs) as again:  # a new store by the old name: a new id
        again.ask([1.0, 0.5])
        with pytest.raises(ValueError, match="handed out by another store"):
            again.tell(mine, 1)


def test_theta0_and_contexts_are_bounded(tmp_path, small):
    """theta0 entries of 1e150 made every later tell fail with a TypeError; a context of 10**400
    raised OverflowError: both are now a ValueError naming the argument, before anything is written."""
    path = tmp_path / "new.sqlite"
    for theta0, message in [(np.full((3, 2), 1e150) * [[1], [0], [-1]], "theta0 has entries as large as 1e\\+150"),
                            ([[10 ** 400, 0], [0, 0], [0, 0]], "theta0 holds a number too large for a float"),
                            ([[1e7, 0], [0, 0], [0, 0]], r"within \+-1e\+06")]:
        with pytest.raises(ValueError, match=message):
            Ranker(path, n_items=3, dim=2, theta0=theta0)
        assert not path.exists()
    with Ranker(path, n_items=3, dim=2, T=20, T0=0, theta0=[[1e6, 0], [0, 0], [0, -1e6]], seed=1) as edge:
        for k in range(5):  # the largest allowed theta0 works on
            edge.tell(edge.ask([1.0, 0.1 * k]), 1)
        assert np.isfinite(edge.theta).all()
    _, ranker, *_ = small
    before = dump(small[0])
    for call, message in [(lambda: ranker.ask([10 ** 400, 1.0]), "x holds a number too large for a float"),
                          (lambda: ranker.ask([1e101, 1.0]), "x has entries as large as 1e\\+101"),
                          (lambda: ranker.ranking(x=[1e200, 0.0]), "x has entries as large as"),
                          (lambda: ranker.decision(x=[10 ** 400, 0]), "x holds a number too large"),
                          (lambda: ranker.diagram([[1.0, 1e300]]), "contexts has entries as large as")]:
        with pytest.raises(ValueError, match=message):
            call()
    assert dump(small[0]) == before


def test_tell_many_is_one_transaction_with_the_guarantees_of_tell(tmp_path):
    kwargs = dict(n_items=4, dim=2, T=60, T0=20, M=3, seed=4)
    env = np.random.default_rng(0)
    contexts = np.c_[np.ones(60), env.normal(0, 1, 60)]
    outcomes = env.integers(0, 3, (60, 2))  # wins, ties with wins + ties <= 3
    outcomes[:, 1] = np.minimum(outcomes[:, 1], 3 - outcomes[:, 0])
    one, many = Ranker(tmp_path / "one.sqlite", **kwargs), Ranker(tmp_path / "many.sqlite", **kwargs)
    for start in range(0, 60, 6):
        asked_one = [one.ask(contexts[k]) for k in range(start, start + 6)]
        asked_many = [many.ask(contexts[k]) for k in range(start, start + 6)]
        assert [t.pair for t in asked_one] == [t.pair for t in asked_many]
        order = [5, 0, 3, 1, 4, 2]  # told out of order
        for k in order:
            one.tell(asked_one[k], int(outcomes[start + k, 0]), ties=int(outcomes[start + k, 1]))
        batch = [(asked_many[k], int(outcomes[start + k, 0]), 3, int(outcomes[start + k, 1])) if k % 2 else
                 {"ticket": asked_many[k].id, "wins": int(outcomes[start + k, 0]), "ties": int(outcomes[start + k, 1])}
                 for k in order]
        assert many.tell_many(batch) == 6
        np.testing.assert_array_equal(one.theta, many.theta)
    query = "SELECT seq, ask_id, wins, ties, m FROM tells ORDER BY seq"
    with sqlite3.connect(tmp_path / "one.sqlite") as a, sqlite3.connect(tmp_path / "many.sqlite") as b:
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        assert a.execute("SELECT state FROM checkpoint").fetchone() == b.execute("SELECT state FROM checkpoint").fetchone()
    assert many.tell_many([]) == 0
    many.close()
    one.close()


def test_a_refused_batch_changes_nothing(small):
    path, ranker, told, expired, open_ = small
    second = ranker.ask([1.0, 0.2])
    before, theta = dump(path), ranker.theta
    for batch, message in [([(open_, 1), (second, 4)], r"outcome 1: wins \+ ties = 4 \+ 0 exceeds m = 3"),
                           ([(open_, 1), (told, 1)], f"outcome 1: ticket {told.id} was already told"),
                           ([(open_, 1), (second, 1), (open_, 0)], f"outcome 2: ticket {open_.id} is told twice in "
                                                                   "this batch \\(outcome 0\\)"),
                           ([(open_,)], r"outcome 0: an outcome is \(ticket, wins"),
                           ([{"ticket": open_, "won": 1}], "outcome 0: a mapping needs the keys ticket and wins"),
                           ([(open_, 1), (99, 1)], "outcome 1: ticket 99 was never asked")]:
        with pytest.raises(ValueError, match=message):
            ranker.tell_many(batch)
        assert dump(path) == before
        np.testing.assert_array_equal(ranker.theta, theta)
    assert ranker.tell_many([(second, 0, 2, 1), {"ticket": open_, "wins": 3}]) == 2
    assert ranker.n_told == 3 and ranker.pending() == []


class _GraphSwapper:
    """Replaces the adjacency of the graph it is handed (a frozen dataclass, swapped through
    object.__setattr__) by a complete one, then asks for a pair that is not an edge."""

    def __init__(self, setting):
        pass

    def select(self, step):
        object.__setattr__(step.graph, "adjacency", np.ones((3, 3), dtype=bool))
        return study.Choice(0, 2, False)


def test_a_policy_that_swaps_its_graph_cannot_ask_for_a_non_edge(tmp_path):
    """The ranker checks a choice against its own graph, not the copy the policy holds."""
    study.register_policy("graph-swapper", _GraphSwapper)
    try:
        with Ranker(tmp_path / "s.sqlite", n_items=3, dim=2, T=20, seed=1, policy="graph-swapper",
                    edges=[(0, 1), (1, 2)]) as ranker:
            before = dump(tmp_path / "s.sqlite")
            with pytest.raises(ValueError, match=r"returned \(0, 2\), which is not an edge"):
                ranker.ask([1.0, 0.5])
            assert dump(tmp_path / "s.sqlite") == before
    finally:
        study.policies.unregister_policy("graph-swapper")
