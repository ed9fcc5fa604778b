"""GET ranking read as a leaderboard (study.online.standings): the Elo-style scale of
study.leaderboard with its anchor, the simultaneous rank intervals from the scores' covariance
(checked against the table's own SEs, an independent computation), Rank (UB) by its definition,
preliminary items, and every choice as a query parameter (bad ones a 422 naming it)."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from study.leaderboard import rank_intervals
from study.online import Ranker
from study.online.service.server import create_app
from study.online.standings import score_root

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import TOKEN, creation, judge_outcome  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
API = "/api/v1"
ELO = 400 / math.log(10)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("standings") / "r.sqlite"
    rng = np.random.default_rng(5)
    with Ranker(path, **creation()) as ranker:
        for _ in range(200):
            ticket = ranker.ask(np.r_[1.0, rng.normal(0, 0.3, 2)])
            ranker.tell(ticket, judge_outcome(ticket, rng))
    return path


def get(store, **query):
    from fastapi.testclient import TestClient

    with TestClient(create_app(lambda: Ranker(store), token=TOKEN, min_judgments=query.pop("default", 30)),
                    base_url="http://127.0.0.1") as client:
        return client.get(f"{API}/ranking", params=query)


@pytest.mark.parametrize("se", ["model", "sandwich"])
def test_the_scores_covariance_gives_the_tables_ses_and_the_rank_intervals(store, se):
    with Ranker(store, readonly=True) as ranker:
        x = ranker.mean_context()
        table = ranker.ranking(x, se=se)
        _, result, _ = ranker._snapshot(se)
    root = score_root(result, x)
    assert np.allclose(np.sqrt((root * root).sum(axis=0))[table["item"]], table["se"], rtol=1e-10, atol=0)
    answer = get(store, se=se).json()
    ranks = rank_intervals(result.theta_d @ x, root, level=0.95, seed=0)
    for row in answer["rows"]:
        assert (row["rank_lower"], row["rank_upper"]) == (ranks.lower[row["item"]], ranks.upper[row["item"]])
        assert row["rank_lower"] <= row["rank"] <= row["rank_upper"]
    assert answer["rank_interval"].startswith("simultaneous 95% rank intervals over all 5 items")


def test_rank_ub_counts_the_items_whose_lower_bound_is_above_the_upper_bound(store):
    rows = get(store, anytime="true").json()["rows"]
    for row in rows:
        assert row["rank_ub"] == 1 + sum(other["lower"] > row["upper"] for other in rows)


def test_the_elo_scale_is_the_leaderboards_with_its_anchor(store):
    logit, elo = get(store).json(), get(store, scale="elo").json()
    assert logit["scale"] == "logit" and elo["scale"] == "elo" and "1000 the items' average" in elo["scale_text"]
    for a, b in zip(logit["rows"], elo["rows"]):
        assert a["name"] == b["name"] and a["rank_lower"] == b["rank_lower"] and a["rank_ub"] == b["rank_ub"]
        for column in ("score", "lower", "upper", "estimate"):
            assert b[column] == pytest.approx(1000 + ELO * a[column], abs=1e-9)
        assert b["se"] == pytest.approx(ELO * a["se"])
    anchored = get(store, scale="elo", anchor="model-c", anchor_rating=1200).json()
    c = next(r for r in anchored["rows"] if r["name"] == "model-c")
    assert c["score"] == pytest.approx(1200) and "model-c at 1200" in anchored["scale_text"]
    gaps = [r["score"] for r in anchored["rows"]]
    assert np.allclose(np.diff(gaps), np.diff([r["score"] for r in elo["rows"]]))


def test_preliminary_items_and_choices_as_query_parameters(store):
    rows = get(store).json()["rows"]
    judgments = {r["name"]: r["judgments"] for r in rows}
    cut = sorted(judgments.values())[2]
    for query in ({"min_judgments": cut}, {"default": cut}):
        answer = get(store, **query).json()
        assert answer["min_judgments"] == cut
        assert {r["name"]: r["preliminary"] for r in answer["rows"]} == {n: j < cut for n, j in judgments.items()}
    plain = get(store, ranks="false").json()
    assert all(r["rank_lower"] is None and r["rank_ub"] is not None for r in plain["rows"])
    assert plain["rank_interval"] is None


@pytest.mark.parametrize("query, loc", [
    ({"scale": "glicko"}, ["query", "scale"]),
    ({"anchor": "model-z", "scale": "elo"}, ["query", "anchor"]),
    ({"min_judgments": -1}, ["query", "min_judgments"]),
    ({"anchor_rating": "nan"}, ["query", "anchor_rating"]),
])
def test_bad_choices_are_a_422_naming_them(store, query, loc):
    answer = get(store, **query)
    assert answer.status_code == 422 and loc in [e["loc"] for e in answer.json()["detail"]]
