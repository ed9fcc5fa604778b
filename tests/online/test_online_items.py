"""Items retired from a live store (study.online.items): never asked again, kept in the likelihood
and in the table (marked), recorded in the store, followed by another process and by verify."""
import sqlite3

import numpy as np
import pytest

from study.online import Ranker, StoreError
from study.online.audit import verify_store
from study.online.items import retire

TOKEN = "admin-token-0123456789abcdef"
API = "/api/v1"
NAMES = ["m-a", "m-b", "m-c", "m-d"]


def _play(ranker, rng, asks, skill=np.array([1.0, 0.4, 0.0, -0.6])):
    seen = []
    for _ in range(asks // 20):
        tickets = [ranker.ask(np.r_[1.0, rng.normal(0, 0.3)]) for _ in range(20)]
        seen += [(k.major, k.other) for k in tickets]
        ranker.tell_many([(k, int(rng.random() < 1 / (1 + np.exp(skill[k.major] - skill[k.other])))) for k in tickets])
    return seen


def test_a_retired_item_is_never_asked_again_and_stays_in_the_table(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "live.sqlite"
    with Ranker(path, items=NAMES, dim=2, T=2000, T0=100, seed=5) as ranker:
        before = _play(ranker, rng, 200)
        assert any(2 in pair for pair in before)
        other = Ranker(path)  # another process's ranker, open before the retirement
        pending = ranker.ask(np.r_[1.0, 0.0])  # asked before, told after: it counts
        assert retire(ranker, "m-c") == 202
        ranker.tell(pending, 1)
        after = _play(ranker, rng, 400)
        assert not any(2 in pair for pair in after)
        assert not any(2 in (k.major, k.other) for k in [other.ask(np.r_[1.0, 0.1]) for _ in range(30)])
        other.close()
        table = ranker.ranking()
        row = table.set_index("name").loc["m-c"]
        assert bool(row["retired"]) and np.isfinite(row["lower"]) and np.isfinite(row["upper"])
        assert table["retired"].sum() == 1 and ranker.n_told == 601
        for bad, message in (("m-c", "already retired"), ("m-x", "no item named")):
            with pytest.raises(ValueError, match=message):
                retire(ranker, bad)
        retire(ranker, "m-a")
        with pytest.raises(ValueError, match="at least 2 must stay"):
            retire(ranker, "m-b")
    with Ranker(path) as ranker:  # reopened: the retirements read back
        assert ranker.config.retired == ((202, 2), (632, 0))
        assert {k.major for k in [ranker.ask(np.r_[1.0, 0.0]) for _ in range(5)]} <= {1, 3}
    assert verify_store(path, replay=True)["replayed"]


def test_a_retirement_that_disconnects_the_graph_is_refused(tmp_path):
    with Ranker(tmp_path / "path.sqlite", n_items=3, dim=1, T=50, seed=1, edges=[(0, 1), (1, 2)]) as ranker:
        with pytest.raises(ValueError, match="unconnected"):
            retire(ranker, "1")
        retire(ranker, "2")
        assert all({k.major, k.other} == {0, 1} for k in [ranker.ask([1.0]) for _ in range(5)])


def test_an_ask_naming_a_retired_item_is_refused_by_verify(tmp_path):
    path = tmp_path / "tampered.sqlite"
    with Ranker(path, n_items=3, dim=1, T=50, seed=1) as ranker:
        ranker.ask([1.0])
        retire(ranker, "2")
        ranker.ask([1.0])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE asks SET major = 2, other = 0 WHERE id = 2")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="asks row 2.*retired before it"):
        verify_store(path)


def test_the_items_command_and_route_retire(tmp_path, capsys):
    from fastapi.testclient import TestClient

    from study.online.__main__ import main
    from study.online.service.server import create_app

    path = tmp_path / "cli.sqlite"
    with Ranker(path, items=NAMES, dim=1, T=100, seed=2):
        pass
    assert main(["items", "retire", str(path), "m-d"]) == 0
    assert "retired from ask 1" in capsys.readouterr().out
    assert main(["items", "retire", str(path), "m-d"]) == 2
    with TestClient(create_app(lambda: Ranker(path), token=TOKEN), base_url="http://127.0.0.1") as client:
        admin = {"Authorization": f"Bearer {TOKEN}"}
        assert client.post(f"{API}/items/retire", json={"name": "m-a"}).status_code == 401
        answer = client.post(f"{API}/items/retire", json={"name": "m-a"}, headers=admin)
        assert answer.status_code == 200 and answer.json() == {"name": "m-a", "retired": True, "from_ask": 1}
        assert client.post(f"{API}/items/retire", json={"name": "m-a"}, headers=admin).status_code == 409
        for _ in range(5):
            ticket = client.post(f"{API}/ask", json={"x": [1.0]}, headers=admin).json()
            assert {ticket["major"], ticket["other"]} == {1, 2}
            client.post(f"{API}/tell", json={"ticket": ticket["id"], "wins": 1}, headers=admin)
        rows = client.get(f"{API}/ranking").json()["rows"]
        assert {row["name"]: row["retired"] for row in rows} == {"m-a": True, "m-b": False, "m-c": False, "m-d": True}
        state = client.get(f"{API}/state").json()  # what the page polls: it redraws when these change
        assert (state["n_items"], state["n_retired"]) == (4, 2)
        added = client.post(f"{API}/items", json={"name": "m-e"}, headers=admin)
        assert added.status_code == 200 and added.json() == {"name": "m-e", "item": 4}
        state = client.get(f"{API}/state").json()
        assert (state["n_items"], state["n_retired"]) == (5, 2)
        assert client.post(f"{API}/items", json={"name": "m-e"}, headers=admin).status_code == 409
        assert client.post(f"{API}/items", json={"name": "m-f"}).status_code == 401
        ticket = client.post(f"{API}/ask", json={"x": [1.0]}, headers=admin).json()
        assert ticket["major_name"] == "m-e" and ticket["other"] in (1, 2)  # not a retired one
    assert main(["items", "add", str(path), "m-g"]) == 0
    assert "added as item 5" in capsys.readouterr().out


def test_a_model_added_to_a_live_ranker_is_compared_at_once_and_ranked_with_its_interval(tmp_path):
    from study.online.items import add, newcomer_asks

    rng = np.random.default_rng(11)
    skill = np.array([1.0, 0.4, 0.0, -0.6, 0.7])
    path = tmp_path / "grow.sqlite"
    with Ranker(path, items=NAMES, dim=2, T=3000, T0=100, seed=6) as ranker:
        _play(ranker, rng, 300, skill)
        other = Ranker(path)  # another process's ranker, open before the item joins
        pending = ranker.ask(np.r_[1.0, 0.0])
        theta = ranker.theta
        assert add(ranker, "m-new") == 4
        assert np.array_equal(ranker.theta[:4], theta) and not ranker.theta[4].any()
        ranker.tell(pending, 0)  # a ticket of before still counts
        tickets = [ranker.ask(np.r_[1.0, rng.normal(0, 0.3)]) for _ in range(newcomer_asks(ranker.config) + 5)]
        assert all(k.major == 4 and k.explored for k in tickets[:newcomer_asks(ranker.config)])  # the rule
        assert tickets[0].major_name == "m-new"
        ranker.tell_many([(k, int(rng.random() < 1 / (1 + np.exp(skill[k.major] - skill[k.other])))) for k in tickets])
        assert ranker.ask(np.r_[1.0, 0.0]).major in range(5)
        ticket = other.ask(np.r_[1.0, 0.1])  # the other process follows: five items
        other.tell(ticket, 1)
        assert other.config.n_items == 5 and other.theta.shape == (5, 2)
        other.close()
        _play(ranker, rng, 200, skill)
        table = ranker.ranking()
        row = table.set_index("name").loc["m-new"]
        assert np.isfinite(row["lower"]) and np.isfinite(row["upper"]) and not row["retired"]
        theta = ranker.theta
    with Ranker(path, items=NAMES, dim=2) as ranker:  # reopened, with the creation arguments
        assert ranker.config.labels == NAMES + ["m-new"] and np.array_equal(ranker.theta, theta)
        with pytest.raises(ValueError, match="already exists"):
            add(ranker, "m-new")
    assert verify_store(path, replay=True)["replayed"]


def test_an_ask_naming_an_item_before_it_joined_is_refused_by_verify(tmp_path):
    from study.online.items import add

    path = tmp_path / "early.sqlite"
    with Ranker(path, n_items=3, dim=1, T=50, seed=1) as ranker:
        ranker.ask([1.0])
        add(ranker, "late")
        ranker.ask([1.0])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE asks SET major = 3, other = 0 WHERE id = 1")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="asks row 1.*added after it"):
        verify_store(path)


def test_get_config_says_the_horizon_and_the_retired(tmp_path):
    from fastapi.testclient import TestClient

    from study.online.service.server import create_app

    path = tmp_path / "config.sqlite"
    with Ranker(path, items=NAMES, dim=1, seed=2) as ranker:  # no T: an open horizon
        retire(ranker, "m-b")
    with TestClient(create_app(lambda: Ranker(path), token=TOKEN), base_url="http://127.0.0.1") as client:
        config = client.get(f"{API}/config").json()
    assert config["open_horizon"] and config["limit"] is None and config["retired"] == ["m-b"]
