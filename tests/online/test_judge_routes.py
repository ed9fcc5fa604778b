"""The judging routes in-process (FastAPI's test client on the server's own app): a battle served
with hidden names and random sides, the vote told to the ranker and logged the way the leaderboard
reads it, names revealed after; no prompt served twice to a judge; every refusal (no token, unknown
judge, another judge's battle, a vote after expiry, an unknown choice) changes nothing; a pair the
ranker asks for without responses is refused with the reason."""
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.online import Ranker
from study.online.service.judge_routes import judge_router, tokens
from study.online.service.pool import read_pool
from study.online.service.server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import TOKEN  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
MODELS = ["alpha", "beta", "gamma", "delta"]
JUDGES = {"ann-token-0123456789": "ann", "bob-token-0123456789": "bob"}
ANN, BOB = ({"Authorization": f"Bearer {t}"} for t in JUDGES)


def make_pool(tmp_path, prompts=12, missing=()):
    p = pd.DataFrame({"question_id": [f"q{k}" for k in range(prompts)],
                      "prompt": [f"Explain **{k}** in one line." for k in range(prompts)],
                      "category": ["math", "code", "prose"] * (prompts // 3)})
    r = pd.DataFrame([{"question_id": f"q{k}", "model": m,
                       "response": f"`r{MODELS.index(m)}` on {k}: <script>alert(1)</script>"}
                      for k in range(prompts) for m in MODELS if (f"q{k}", m) not in missing])
    p.to_json(tmp_path / "prompts.jsonl", orient="records", lines=True)
    r.to_json(tmp_path / "responses.jsonl", orient="records", lines=True)
    return read_pool(tmp_path / "prompts.jsonl", tmp_path / "responses.jsonl", category="category")


@contextmanager
def served(tmp_path, pool, **options):
    from fastapi.testclient import TestClient

    store = tmp_path / "r.sqlite"
    Ranker(store, items=MODELS, dim=pool.contexts.shape[1], T=500, T0=40, seed=2).close()
    app = create_app(lambda: Ranker(store), token=TOKEN)
    app.include_router(judge_router(pool, identify=tokens(JUDGES), log=tmp_path / "votes.jsonl", **options))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, app.state.service, tmp_path / "votes.jsonl"


def ranker(service, read):
    """``read(ranker)`` in the ranker's own thread (its SQLite connection belongs to it)."""
    return service._thread.submit(read, service.ranker).result()


def told(service):
    return ranker(service, lambda r: r.counts()["told"])


def pending(service):
    return ranker(service, lambda r: r.pending())


def test_a_judge_votes_and_the_log_reads_as_battles(tmp_path):
    pool = make_pool(tmp_path)
    with served(tmp_path, pool, overlap=0.0) as (client, service, log):
        assert client.get("/judge").status_code == 200
        assert client.get("/static/judge.js").status_code == 200
        seen, choices = set(), ["left", "right", "tie", "bothbad"] * 3
        for choice in choices:
            battle = client.get("/api/v1/battle/next", headers=ANN).json()
            assert battle["done"] is False and battle["question_id"] not in seen
            seen.add(battle["question_id"])
            assert set(battle) == {"done", "battle", "question_id", "category", "prompt_html", "left_html",
                                   "right_html", "expires_at"}
            assert not any(m in json.dumps(battle) for m in MODELS)  # the names stay hidden until the vote
            assert "<script>" not in battle["left_html"] and "&lt;script&gt;" in battle["left_html"]
            answer = client.post("/api/v1/battle/vote", headers=ANN, json={"battle": battle["battle"],
                                                                           "choice": choice}).json()
            assert answer["recorded"] and {answer["left_model"], answer["right_model"]} <= set(MODELS)
            assert f"<code>r{MODELS.index(answer['left_model'])}</code>" in battle["left_html"]
            assert f"<code>r{MODELS.index(answer['right_model'])}</code>" in battle["right_html"]
        assert client.get("/api/v1/battle/next", headers=ANN).json()["done"] is True  # 12 prompts, each once
        assert told(service) == 12
    rows = pd.read_json(log, lines=True)
    assert rows["winner"].tolist() == ["model_a", "model_b", "tie", "tie (bothbad)"] * 3
    assert (rows["left"] == rows["model_a"]).all() and set(rows["judge"]) == {"ann"}
    assert rows["question_id"].nunique() == 12 and (rows["seconds"] >= 0).all()
    from study.leaderboard import read_battles
    battles = read_battles(log)
    assert battles.rows == 12 and battles.judge_count == 1


def test_the_told_outcome_is_the_judges_verdict_for_the_tickets_pair(tmp_path):
    pool = make_pool(tmp_path, prompts=30)
    with served(tmp_path, pool, overlap=0.0, seed=5) as (client, service, log):
        rng = np.random.default_rng(0)
        for _ in range(30):
            battle = client.get("/api/v1/battle/next", headers=ANN).json()
            client.post("/api/v1/battle/vote", headers=ANN,
                        json={"battle": battle["battle"], "choice": ["left", "right"][rng.integers(2)]})
        assert pending(service) == []  # nothing left open
        from study.online import told_rows
        stored = ranker(service, told_rows)
    rows = pd.read_json(log, lines=True)
    sides = set()
    for (_, row), (_, vote) in zip(stored.iterrows(), rows.iterrows()):
        winner = vote["model_a"] if vote["winner"] == "model_a" else vote["model_b"]
        assert {row["model_a"], row["model_b"]} == {vote["model_a"], vote["model_b"]}
        assert (row["wins_b"] == 1) == (winner == row["model_b"]) and row["ties"] == 0
        sides.add(vote["model_a"] == row["model_a"])
    assert sides == {True, False}  # the sides were drawn, both ways


def test_two_judges_a_share_re_served_and_no_prompt_twice(tmp_path):
    pool = make_pool(tmp_path, prompts=60)
    with served(tmp_path, pool, overlap=0.5, seed=1) as (client, service, log):
        for step in range(80):
            headers = (ANN, BOB)[step % 2]
            battle = client.get("/api/v1/battle/next", headers=headers).json()
            client.post("/api/v1/battle/vote", headers=headers,
                        json={"battle": battle["battle"], "choice": ["left", "right", "tie"][step % 3]})
        report = client.get("/api/v1/judges/report", headers=ANN).json()
    rows = pd.read_json(log, lines=True)
    assert not rows.duplicated(["judge", "question_id"]).any()
    pairs = rows.assign(pair=[frozenset(p) for p in zip(rows.model_a, rows.model_b)])
    both = pairs.groupby(["question_id", "pair"])["judge"].nunique()
    assert (both == 2).sum() >= 10  # about 0.5 x 40 of bob's battles re-serve ann's (and the reverse)
    assert {j["judge"] for j in report["judges"]} == {"ann", "bob"} and report["agreement"]["battles"] >= 10
    assert sum(j["votes"] for j in report["judges"]) == 80


def test_refusals_change_nothing(tmp_path):
    pool = make_pool(tmp_path)
    with served(tmp_path, pool, overlap=0.0, ttl=0.3) as (client, service, log):
        assert client.get("/api/v1/battle/next").status_code == 401
        assert client.get("/api/v1/battle/next", headers={"Authorization": "Bearer nobody"}).json()["reason"] \
            == "unknown_judge"
        battle = client.get("/api/v1/battle/next", headers=ANN).json()["battle"]
        asked = ranker(service, lambda r: r.counts()["asked"])
        for headers, body, status, reason in [
                (BOB, {"battle": battle, "choice": "left"}, 403, "other_judge"),
                ({"Authorization": "Bearer revoked"}, {"battle": battle, "choice": "left"}, 403, "unknown_judge"),
                (ANN, {"battle": "nope", "choice": "left"}, 404, "unknown_battle"),
                (ANN, {"battle": battle, "choice": "maybe"}, 422, "choice")]:
            answer = client.post("/api/v1/battle/vote", headers=headers, json=body)
            assert (answer.status_code, answer.json()["reason"]) == (status, reason)
        assert told(service) == 0 and not log.exists()
        time.sleep(0.4)
        answer = client.post("/api/v1/battle/vote", headers=ANN, json={"battle": battle, "choice": "left"})
        assert (answer.status_code, answer.json()["reason"]) == (410, "expired")
        assert told(service) == 0 and pending(service) == [] and not log.exists()
        assert ranker(service, lambda r: r.counts()["asked"]) == asked
        skip = client.get("/api/v1/battle/next", headers=ANN).json()["battle"]
        answer = client.post("/api/v1/battle/vote", headers=ANN, json={"battle": skip, "choice": "skip"}).json()
        assert answer["recorded"] is False and pending(service) == [] and not log.exists()


def test_a_pair_without_responses_is_refused_with_the_reason(tmp_path):
    missing = {(f"q{k}", "delta") for k in range(12)}  # delta answered nothing: the ranker still asks it
    pool = make_pool(tmp_path, missing=missing)
    with served(tmp_path, pool, overlap=0.0, retries=40, seed=3) as (client, service, log):
        outcomes = []
        for _ in range(12):
            answer = client.get("/api/v1/battle/next", headers=ANN)
            if answer.status_code == 409:
                outcomes.append(answer.json()["reason"])
                assert "Ranker.ask cannot yet be restricted" in answer.json()["detail"]
                continue
            battle = answer.json()
            if battle["done"]:
                break
            vote = client.post("/api/v1/battle/vote", headers=ANN, json={"battle": battle["battle"], "choice": "left"})
            assert "delta" not in (vote.json()["left_model"], vote.json()["right_model"])
        assert pending(service) == []  # the tickets naming delta were expired
        assert ranker(service, lambda r: r.counts()["asked"]) > told(service)  # (there were such tickets)
    rows = pd.read_json(log, lines=True)
    assert "delta" not in set(rows.model_a) | set(rows.model_b)


def test_the_gap_is_said_when_every_try_meets_a_model_without_a_response(tmp_path):
    pool = make_pool(tmp_path, missing={(f"q{k}", m) for k in range(12) for m in ("gamma", "delta")})
    with served(tmp_path, pool, overlap=0.0, retries=1, seed=0) as (client, service, log):
        answers = [client.get("/api/v1/battle/next", headers=BOB).json() for _ in range(12)]
        assert "no_response" in {a.get("reason") for a in answers}
        served_ok = sum("battle" in a for a in answers)
        assert len(pending(service)) == served_ok  # only the served battles' tickets stay open
