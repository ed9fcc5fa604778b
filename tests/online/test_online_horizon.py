"""The open horizon and raising T (study.online.horizon): a store without T keeps going, the open
schedule is fixed-T RB up to its first horizon, a raise is recorded and followed by a reopen and by
verify --replay."""
import numpy as np
import pytest

from study.online import Ranker
from study.online.audit import verify_store
from study.online.horizon import at, first_epoch


def _run(ranker, rng, truth, asks, batch=50):
    for _ in range(asks // batch):
        tickets = [ranker.ask(rng.standard_normal(truth.shape[1])) for _ in range(batch)]
        outcomes = []
        for k in tickets:
            x = np.array(k.x)
            p = 1.0 / (1.0 + np.exp(-(x @ truth[k.other] - x @ truth[k.major])))
            outcomes.append((k, int(rng.random() < p)))
        ranker.tell_many(outcomes)


def test_the_schedule_doubles_from_the_first_horizon_and_follows_raises():
    assert [at(500, True, (), t) for t in (1, 500, 501, 1000, 1001, 4001)] == [500, 500, 1000, 1000, 2000, 8000]
    assert [at(500, False, ((301, 800),), t) for t in (300, 301, 900)] == [500, 800, 800]
    assert [at(500, True, ((301, 700),), t) for t in (300, 301, 701, 1401)] == [500, 700, 1400, 2800]


def test_a_store_created_without_T_is_open(tmp_path):
    with Ranker(tmp_path / "s.sqlite", n_items=3, dim=2, seed=1) as ranker:
        assert ranker.config.open_horizon and ranker.config.limit is None and ranker.config.T == 500
        assert '"open_horizon": true' in ranker.config.to_json()
    # the first epoch by the size: stage 1 (0.4 T_1 asks of M comparisons) holds 10 per parameter
    for (n, d, M), T1 in {(10, 10, 1): 2500, (30, 10, 1): 7500, (30, 10, 3): 2500, (5, 10, 20): 500,
                          (7, 3, 1): 525}.items():
        assert first_epoch(n, d, M) == T1 and 0.4 * T1 * M >= 10 * n * d
        with Ranker(tmp_path / f"s{n}-{d}-{M}.sqlite", n_items=n, dim=d, M=M, seed=1) as ranker:
            assert ranker.config.T == T1 and ranker.config.T0 == (2 * T1) // 5
    with Ranker(tmp_path / "o.sqlite", n_items=3, dim=2, T=40, open_horizon=True, seed=1) as ranker:
        assert ranker.config.T == 40  # open from a given T: that T
    with Ranker(tmp_path / "s.sqlite") as ranker:  # reopened: the stored T, whatever the rule says now
        assert ranker.config.T == 500
    with Ranker(tmp_path / "f.sqlite", n_items=3, dim=2, T=50, seed=1) as ranker:  # a fixed T: stored as before
        assert ranker.config.limit == 50 and "open_horizon" not in ranker.config.to_json()


def test_an_open_store_takes_5000_asks_reopens_and_verifies(tmp_path):
    rng = np.random.default_rng(7)
    truth = np.random.default_rng(8).standard_normal((3, 2))
    path = tmp_path / "open.sqlite"
    ranker = Ranker(path, n_items=3, dim=2, T=400, open_horizon=True, seed=5)
    _run(ranker, rng, truth, 2500)
    theta = ranker.theta
    ranker.close()
    ranker = Ranker(path)  # reopened across three epochs
    assert np.array_equal(ranker.theta, theta)
    _run(ranker, rng, truth, 2500)
    assert ranker.n_asked == ranker.n_told == 5000
    assert ranker.config.horizon_at(5001) == 6400
    ticket = ranker.ask(np.ones(2))  # and keeps going
    ranker.tell(ticket, 1)
    assert len(ranker.ranking()) == 3
    ranker.close()
    assert verify_store(path, replay=True)["replayed"]


def test_the_open_schedule_is_fixed_T_up_to_its_first_horizon(tmp_path):
    tickets = {}
    for name, kwargs in (("fixed", dict(T=120)), ("open", dict(T=120, open_horizon=True))):
        rng = np.random.default_rng(3)
        truth = np.random.default_rng(4).standard_normal((4, 2))
        with Ranker(tmp_path / f"{name}.sqlite", n_items=4, dim=2, seed=9, **kwargs) as ranker:
            _run(ranker, rng, truth, 120, batch=20)
            tickets[name] = ([(k.major, k.other, k.explored) for k in ranker.pending()], ranker.theta)
            with pytest.raises(ValueError, match="horizon") if name == "fixed" else _nothing():
                ranker.ask(np.ones(2))
    assert np.array_equal(tickets["fixed"][1], tickets["open"][1])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_larger_T_on_reopening_raises_a_fixed_horizon_and_replay_follows(tmp_path):
    rng = np.random.default_rng(1)
    truth = np.random.default_rng(2).standard_normal((3, 2))
    path = tmp_path / "fixed.sqlite"
    with Ranker(path, n_items=3, dim=2, T=100, seed=4) as ranker:
        _run(ranker, rng, truth, 100)
        with pytest.raises(ValueError, match="horizon are used"):
            ranker.ask(np.ones(2))
    with pytest.raises(ValueError, match="T: stored 100, given 50"):
        Ranker(path, T=50)
    with Ranker(path, T=300) as ranker:
        assert ranker.config.extended == ((101, 300),) and ranker.config.limit == 300
        _run(ranker, rng, truth, 150)
        ranker.extend_horizon(1000)  # the API (and python -m study.online horizon)
        with pytest.raises(ValueError, match="does not raise"):
            ranker.extend_horizon(500)
        _run(ranker, rng, truth, 50)
        theta = ranker.theta
    with Ranker(path, T=1000) as ranker:  # the horizon in force: no change
        assert ranker.config.extended == ((101, 300), (251, 1000)) and np.array_equal(ranker.theta, theta)
    assert verify_store(path, replay=True)["replayed"]


def test_a_raise_by_another_process_is_followed(tmp_path):
    path = tmp_path / "two.sqlite"
    first = Ranker(path, n_items=3, dim=2, T=20, seed=2)
    second = Ranker(path)
    for _ in range(20):
        first.tell(first.ask(np.ones(2)), 1)
    second.extend_horizon(40)
    first.tell(first.ask(np.ones(2)), 0)  # the first writer sees the raise
    assert first.config.limit == 40 and second.n_told == 21
    first.close()
    second.close()
    assert verify_store(path, replay=True)["replayed"]


def test_the_horizon_command_raises_it(tmp_path, capsys):
    from study.online.__main__ import main

    path = tmp_path / "cli.sqlite"
    with Ranker(path, n_items=3, dim=2, T=10, seed=1) as ranker:
        ranker.tell(ranker.ask(np.ones(2)), 1)
    assert main(["horizon", str(path), "30"]) == 0
    assert "raised to T = 30 from ask 2" in capsys.readouterr().out
    assert main(["horizon", str(path), "20"]) == 2
    assert "does not raise" in capsys.readouterr().err
    with Ranker(path, readonly=True) as ranker:
        assert ranker.config.limit == 30
