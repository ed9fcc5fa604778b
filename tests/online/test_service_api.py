"""The ranker's JSON API (study.online.service.server), every route in-process through FastAPI's test
client, and every refusal: 422 naming the field, 404/409 for tickets, 413 for a body too large,
401/403 without or with a wrong token -- each leaving the store as it was (its complete dump
compared before and after, and ``verify_store`` passing)."""
import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.online import Ranker, verify_store
from study.online.service.server import create_app, is_loopback

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import online_child  # noqa: E402  (tests/support)
from service_support import ITEMS, TOKEN, creation, judge_outcome  # noqa: E402

# starlette's TestClient, on httpx, asks for its successor httpx2 (FastAPI's docs still name httpx)
pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
API = "/api/v1"


def make_store(path, told=60, open_tickets=3, **arguments):
    rng = np.random.default_rng(5)
    with Ranker(path, **{**creation(), **arguments}) as ranker:
        for _ in range(told):
            ticket = ranker.ask(np.r_[1.0, rng.normal(0, 0.3, ranker.config.dim - 1)])
            ranker.tell(ticket, judge_outcome(ticket, rng))
        for _ in range(open_tickets):
            ranker.ask(np.r_[1.0, np.zeros(ranker.config.dim - 1)])
    return path


@pytest.fixture
def store(tmp_path):
    return make_store(tmp_path / "r.sqlite")


@contextmanager
def served(store, **options):
    from fastapi.testclient import TestClient

    with TestClient(create_app(lambda: Ranker(store), token=TOKEN, **options), base_url="http://127.0.0.1") as client:
        yield client


@contextmanager
def unchanged(store):
    """The store's content is the same after the block, and it verifies."""
    before = online_child.dump(store)
    yield
    assert online_child.dump(store) == before
    verify_store(store)


def test_every_route_answers_as_the_ranker_does(store, tmp_path):
    with Ranker(store, readonly=True) as reader:
        ranking, decision = reader.ranking(), reader.decision()
        intervals, theta, pending = reader.intervals(anytime=True), reader.theta, reader.pending()
        x = reader.mean_context()
        contexts = np.array([[1.0, 0.2, -0.1], [1.0, -0.3, 0.4]])
        adjacency = reader.diagram(contexts)
    with served(store) as client:
        assert client.get(f"{API}/health").json()["status"] == "ok"
        state = client.get(f"{API}/state").json()
        assert (state["n_told"], state["n_asked"], state["counts"]["open"]) == (60, 63, 3)
        config = client.get(f"{API}/config").json()
        assert config["items"] == ITEMS and config["dim"] == 3 and config["T"] == 400
        answer = client.get(f"{API}/ranking").json()
        assert answer["x"] == x.tolist() and answer["score"] == "debiased"
        pd.testing.assert_frame_equal(pd.DataFrame(answer["rows"])[list(pd.DataFrame(ranking).columns)], pd.DataFrame(ranking),
                                          check_dtype=False)  # the leaderboard columns besides (test_service_standings)
        items = {s["name"]: s for s in answer["items"]}
        assert sum(s["judgments"] for s in items.values()) == 2 * 60
        assert 0 <= items["model-a"]["win_rate"] <= 1 and items["model-a"]["win_rate"] > items["model-e"]["win_rate"]
        at = client.get(f"{API}/ranking", params={"x": [1.0, 0.5, 0.5], "anytime": "true", "se": "sandwich"}).json()
        assert at["x"] == [1.0, 0.5, 0.5] and at["anytime"] and at["se_method"] == "sandwich"
        answer = client.get(f"{API}/decision").json()
        assert (answer["decided"], tuple(answer["top"]), answer["top_names"]) == (
            decision.decided, decision.top, list(decision.top_names))
        assert answer["words"] == decision.words() and answer["top_names"] == [ITEMS[i] for i in decision.top]
        rows = client.get(f"{API}/intervals", params={"anytime": "true"}).json()["rows"]
        np.testing.assert_array_equal([r["lower"] for r in rows], intervals["lower"])
        np.testing.assert_array_equal(client.get(f"{API}/estimate").json()["theta"], theta)
        assert [t["id"] for t in client.get(f"{API}/pending").json()] == [t.id for t in pending] == [61, 62, 63]
        # the export, paged: every told row once, in order, after any sequence number
        page = client.get(f"{API}/told", params={"after": 0, "limit": 25}).json()
        seqs = [r["seq"] for r in page["rows"]]
        while page["next_after"] is not None:
            page = client.get(f"{API}/told", params={"after": page["next_after"], "limit": 25}).json()
            seqs += [r["seq"] for r in page["rows"]]
        assert seqs == list(range(1, 61))
        tail = client.get(f"{API}/told", params={"after": 58}).json()
        assert [r["seq"] for r in tail["rows"]] == [59, 60] and tail["next_after"] is None
        assert tail["rows"][0]["major_name"] == ITEMS[tail["rows"][0]["major"]]
        points = client.get(f"{API}/timeline", params={"points": 7}).json()["points"]
        assert len(points) <= 7 and points[0][1] == 1 and points[-1][1] == 60
        svg = client.get(f"{API}/diagram.svg")
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
        assert svg.text.lstrip().startswith("<?xml") and "<svg" in svg.text
        drawn = client.post(f"{API}/diagram", json={"contexts": contexts.tolist(), "image": "png"}).json()
        np.testing.assert_array_equal(np.array(drawn["adjacency"], dtype=bool), adjacency)
        assert drawn["image_format"] == "png" and len(drawn["image"]) > 1000
        # the writes
        ticket = client.post(f"{API}/ask", json={"x": [1.0, 0.1, 0.2]}, headers=AUTH).json()
        assert ticket["id"] == 64 and ticket["major_name"] == ITEMS[ticket["major"]]
        told = client.post(f"{API}/tell", json={"ticket": 64, "wins": 1, "store_id": ticket["store_id"],
                                                "major": ticket["major"], "other": ticket["other"]}, headers=AUTH)
        assert told.json() == {"ticket": 64, "seq": 61, "n_told": 61}
        batch = client.post(f"{API}/tell_many", json={"outcomes": [{"ticket": 61, "wins": 0},
                                                                   {"ticket": 62, "wins": 1, "m": 1, "ties": 0}]},
                            headers=AUTH).json()
        assert batch == {"told": 2, "first_seq": 62, "n_told": 63}
        assert client.post(f"{API}/expire", json={"ticket": 63}, headers=AUTH).json() == {"expired": 1}
        client.post(f"{API}/ask", json={"x": [1.0, 0.0, 0.0]}, headers=AUTH)
        assert client.post(f"{API}/expire", json={"older_than": 0}, headers=AUTH).json() == {"expired": 1}
        assert client.get(f"{API}/state").json()["counts"] == {"asked": 65, "told": 63, "open": 0, "expired": 2,
                                                                "comparisons": 63, "ties": 0}
    verify_store(store, replay=True)


def test_the_schema_names_every_route_and_the_token(store):
    with served(store) as client:
        schema = client.get(f"{API}/openapi.json").json()
    paths = {p.removeprefix(API) for p in schema["paths"]}
    assert paths == {"/ask", "/tell", "/tell_many", "/expire", "/pending", "/state", "/config", "/estimate",
                     "/ranking", "/intervals", "/decision", "/told", "/timeline", "/diagram.svg", "/diagram",
                     "/health", "/judges", "/judges/revoke", "/battles", "/items", "/items/retire", "/"}
    for method, route in (("post", "/judges"), ("get", "/judges"), ("post", "/judges/revoke"), ("post", "/items"),
                          ("post", "/items/retire")):  # the admin's
        assert schema["paths"][f"{API}{route}"][method]["security"] == [{"HTTPBearer": []}]
    tell = schema["paths"][f"{API}/tell"]["post"]
    assert tell["security"] == [{"HTTPBearer": []}] and {"401", "403", "404", "409", "413", "422"} <= set(tell["responses"])
    assert "security" not in schema["paths"][f"{API}/health"]["get"]


BAD = [  # (route, body, the field named by the 422)
    ("tell", {"ticket": 1, "win": 1}, ["body", "wins"]),
    ("tell", {"ticket": 1, "wins": 1, "win": 1}, ["body", "win"]),
    ("tell", {"ticket": 61, "wins": -1}, ["body", "wins"]),
    ("tell", {"ticket": 61, "wins": 1.5}, ["body", "wins"]),
    ("tell", {"ticket": 61, "wins": True}, ["body", "wins"]),
    ("tell", {"ticket": 0, "wins": 1}, ["body", "ticket"]),
    ("tell", {"ticket": 61, "wins": 1, "m": 2}, ["body", "m"]),
    ("tell", {"ticket": 61, "wins": 1, "ties": 1}, ["body", "wins"]),
    ("tell", {"ticket": 61, "wins": 1, "store_id": "not-hex"}, ["body", "store_id"]),
    ("tell", {"ticket": 61, "wins": 1, "major": 0}, ["body", "other"]),
    ("tell_many", {"outcomes": [{"ticket": 61, "wins": 0}, {"ticket": 62, "wins": 1, "m": 3}]}, ["body", "outcomes", 1, "m"]),
    ("tell_many", {"outcomes": [{"ticket": 61, "wins": 0}, {"ticket": 62}]}, ["body", "outcomes", 1, "wins"]),
    ("tell_many", {"outcomes": [{"ticket": 61, "wins": 0}, {"ticket": 61, "wins": 1}]}, ["body", "outcomes", 1, "ticket"]),
    ("ask", {"x": [1.0, 2.0]}, ["body", "x"]),
    ("ask", {"x": [1.0, 2.0, 1e200]}, ["body", "x", 2]),
    ("ask", {"x": "1, 2, 3"}, ["body", "x"]),
    ("ask", {}, ["body", "x"]),
    ("expire", {}, ["body", "ticket"]),
    ("expire", {"ticket": 61, "older_than": 5}, ["body", "older_than"]),
    ("expire", {"older_than": -1}, ["body", "older_than"]),
]


@pytest.mark.parametrize("route, body, field", BAD, ids=[f"{r}-{'.'.join(map(str, f[1:]))}" for r, _, f in BAD])
def test_a_bad_field_is_a_422_naming_it_and_changes_nothing(store, route, body, field):
    with served(store) as client, unchanged(store):
        answer = client.post(f"{API}/{route}", json=body, headers=AUTH)
        assert answer.status_code == 422, answer.text
        assert field in [e["loc"] for e in answer.json()["detail"]], answer.json()


@pytest.mark.parametrize("raw, field", [(b'{"x": [NaN, 1, 2]}', ["body", "x", 0]),
                                        (b'{"x": [1, 2, Infinity]}', ["body", "x", 2]),
                                        (b'{"x": [1, 2', ["body", 11])])
def test_malformed_json_is_a_422_and_changes_nothing(store, raw, field):
    with served(store) as client, unchanged(store):
        answer = client.post(f"{API}/ask", content=raw, headers={**AUTH, "Content-Type": "application/json"})
        assert answer.status_code == 422 and field in [e["loc"] for e in answer.json()["detail"]], answer.text


@pytest.mark.parametrize("path, params, field", [
    ("ranking", {"x": [1.0, 2.0]}, ["query", "x"]),
    ("ranking", {"level": 1.5}, ["query", "level"]),
    ("ranking", {"se": "robust"}, ["query", "se"]),
    ("ranking", {"tightest_at": -3}, ["query", "tightest_at"]),
    ("decision", {"top": 5}, ["query", "top"]),
    ("told", {"limit": 0}, ["query", "limit"]),
    ("told", {"after": -1}, ["query", "after"]),
])
def test_a_bad_query_is_a_422_naming_it(store, path, params, field):
    with served(store) as client, unchanged(store):
        answer = client.get(f"{API}/{path}", params=params)
        assert answer.status_code == 422 and field in [e["loc"] for e in answer.json()["detail"]], answer.text


def test_tickets_told_expired_unknown_or_of_another_store_are_refused_and_change_nothing(store, tmp_path):
    other = make_store(tmp_path / "other.sqlite", told=0, open_tickets=1)
    with Ranker(other, readonly=True) as reader:
        foreign = reader.pending()[0]
    with served(store) as client:
        assert client.post(f"{API}/expire", json={"ticket": 63}, headers=AUTH).status_code == 200
        mine = client.get(f"{API}/pending").json()[0]
        cases = [  # (route, body, status, reason)
            ("tell", {"ticket": 5, "wins": 0}, 409, "told"),
            ("tell", {"ticket": 63, "wins": 1}, 409, "expired"),
            ("tell", {"ticket": 999, "wins": 1}, 404, "never_asked"),
            ("tell", {"ticket": 61, "wins": 1, "store_id": foreign.store_id}, 409, "other_store"),
            ("tell", {"ticket": 61, "wins": 1, "store_id": mine["store_id"], "major": mine["other"],
                      "other": mine["major"]}, 409, "pair"),
            ("tell_many", {"outcomes": [{"ticket": 61, "wins": 1}, {"ticket": 63, "wins": 1}]}, 409, "expired"),
            ("expire", {"ticket": 5}, 409, "told"),
            ("expire", {"ticket": 999}, 404, "never_asked"),
        ]
        for route, body, status, reason in cases:
            with unchanged(store):
                answer = client.post(f"{API}/{route}", json=body, headers=AUTH)
                assert (answer.status_code, answer.json()["reason"]) == (status, reason), (route, body, answer.text)
        batch = client.post(f"{API}/tell_many", json={"outcomes": [{"ticket": 61, "wins": 1}, {"ticket": 63, "wins": 1}]},
                            headers=AUTH).json()
        assert batch["outcome"] == 1 and batch["ticket"] == 63


def test_a_retried_tell_is_recognised_and_never_counted_twice(store):
    with served(store) as client:
        first = client.post(f"{API}/tell", json={"ticket": 61, "wins": 1}, headers=AUTH)
        assert first.status_code == 200
        with unchanged(store):
            again = client.post(f"{API}/tell", json={"ticket": 61, "wins": 1, "m": 1}, headers=AUTH).json()
            assert again["reason"] == "told" and again["same_outcome"] is True
            assert again["stored"] == {"seq": 61, "wins": 1, "ties": 0, "m": 1}
            other = client.post(f"{API}/tell", json={"ticket": 61, "wins": 0}, headers=AUTH).json()
            assert other["reason"] == "told" and other["same_outcome"] is False
        batch = {"outcomes": [{"ticket": 62, "wins": 0}, {"ticket": 63, "wins": 1}]}
        assert client.post(f"{API}/tell_many", json=batch, headers=AUTH).status_code == 200
        with unchanged(store):
            assert client.post(f"{API}/tell_many", json=batch, headers=AUTH).json()["same_outcome"] is True
            batch["outcomes"][1]["wins"] = 0
            assert client.post(f"{API}/tell_many", json=batch, headers=AUTH).json()["same_outcome"] is False
        assert client.get(f"{API}/state").json()["n_told"] == 63


def test_a_body_over_the_limit_is_a_413_and_changes_nothing(store):
    outcomes = [{"ticket": 61 + k % 3, "wins": 0} for k in range(200)]

    def chunks():  # no Content-Length: counted as it streams in
        yield b'{"outcomes": ['
        for k in range(199):
            yield b'{"ticket": 61, "wins": 0}, '
        yield b'{"ticket": 61, "wins": 0}]}'

    with served(store, max_body=2000) as client:
        with unchanged(store):
            assert len(json.dumps({"outcomes": outcomes})) > 2000
            answer = client.post(f"{API}/tell_many", json={"outcomes": outcomes}, headers=AUTH)
            assert answer.status_code == 413 and "2,000 bytes" in answer.json()["detail"]
            answer = client.post(f"{API}/tell_many", content=chunks(),
                                 headers={**AUTH, "Content-Type": "application/json"})
            assert answer.status_code == 413
        small = client.post(f"{API}/tell_many", json={"outcomes": outcomes[:2]}, headers=AUTH)
        assert small.status_code == 200 and small.json()["n_told"] == 62  # under the limit: told


def test_writes_need_the_token_and_reads_need_it_off_loopback(store):
    with served(store) as client, unchanged(store):
        for route, body in (("ask", {"x": [1.0, 0.0, 0.0]}), ("tell", {"ticket": 61, "wins": 1}),
                            ("tell_many", {"outcomes": [{"ticket": 61, "wins": 1}]}), ("expire", {"older_than": 0})):
            missing = client.post(f"{API}/{route}", json=body)
            assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
            assert client.post(f"{API}/{route}", json=body, headers={"Authorization": "Bearer nope"}).status_code == 403
            assert client.post(f"{API}/{route}", json=body,
                               headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        assert client.get(f"{API}/ranking").status_code == 200 and client.get("/").status_code == 200
    with served(store, reads_need_token=True) as client, unchanged(store):
        for path in ("state", "config", "ranking", "decision", "told", "timeline", "pending", "diagram.svg"):
            assert client.get(f"{API}/{path}").status_code == 401, path
            assert client.get(f"{API}/{path}", headers={"Authorization": "Bearer nope"}).status_code == 403
            assert client.get(f"{API}/{path}", headers=AUTH).status_code == 200, path
        assert client.get(f"{API}/health").status_code == 200  # liveness only
        assert client.get("/").status_code == 200  # the page's shell; its data need the token
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.5.0.1", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.org"))


def test_an_empty_store_answers_without_errors(tmp_path):
    store = make_store(tmp_path / "empty.sqlite", told=0, open_tickets=0)
    with served(store) as client:
        assert client.get(f"{API}/state").json()["n_told"] == 0
        assert client.get(f"{API}/ranking").json()["reason"] == "nothing_asked"
        decision = client.get(f"{API}/decision").json()
        assert not decision["decided"] and decision["words"].startswith("no intervals yet")
        assert client.get(f"{API}/diagram.svg").status_code == 409
        assert client.get(f"{API}/told").json() == {"rows": [], "n_told": 0, "next_after": None}
        assert client.get(f"{API}/intervals").json()["reason"] == "no_intervals"


def test_the_page_and_its_assets_ship_in_the_package_and_fetch_nothing_else(store):
    static = Path(__file__).resolve().parents[2] / "study" / "online" / "service" / "static"
    with served(store) as client:
        page = client.get("/")
        assert page.status_code == 200 and 'src="static/app.js"' in page.text
        for name, kind in (("app.js", "javascript"), ("style.css", "text/css"), ("index.html", "text/html")):
            asset = client.get(f"/static/{name}")
            assert asset.status_code == 200 and kind in asset.headers["content-type"]
    for asset in static.iterdir():
        text = asset.read_text()
        # no address outside the server (the SVG namespace is a name, not a fetch), no protocol-relative one
        assert set(re.findall(r"\w+://[^\s\"')`]+", text)) <= {"http://www.w3.org/2000/svg"}, asset
        assert not re.search(r"(src|href)=\"//|url\(\s*['\"]?//|@import", text), asset
    pyproject = (static.parents[3] / "pyproject.toml").read_text()
    assert '"online/service/static/*"' in pyproject  # package-data: the page installs with the package
