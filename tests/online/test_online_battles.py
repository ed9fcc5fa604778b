"""The battle-log export (study.online.export, ``python -m study.online export``, ``GET
/api/v1/battles``): the leaderboard of the export equals the ranker's own ranking; two named judges
tell through their own tokens over HTTP and ``GET ranking?se=cluster`` clusters by them; the admin
routes refuse a judge's token."""
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.online import Ranker, judges, verify_store
from study.online.export import battle_rows, export_battles, export_told, told_rows
from study.online.service.server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_online_judges import judged_store  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
TOKEN = "admin-token-0123456789abcdef"
API = "/api/v1"


def leaderboard_of(path, tmp_path) -> pd.DataFrame:
    out = tmp_path / f"lb_{Path(path).name}"
    done = subprocess.run([sys.executable, "-m", "study.leaderboard", str(path), "--out", str(out), "--no-figures",
                           "--quiet", "--formats", "csv"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return pd.read_csv(out / "leaderboard.csv").set_index("model")


def assert_same_ranking(ours: pd.DataFrame, board: pd.DataFrame) -> None:
    """The leaderboard's scores (the MLE of the told rows) are the ranker's debiased scores (one
    Newton step from its estimate) to a small fraction of an SE, its order the same, its
    judge-clustered SEs (at the MLE) the ranker's (at its estimate) within a few per cent."""
    ours = ours.set_index("name")
    assert list(ours.index) == list(board.index)
    gap = (ours["score"] - board.loc[ours.index, "score"]).abs()
    assert (gap < 0.01 * ours["se"]).all(), gap
    ratio = ours["se"] / board.loc[ours.index, "se"]
    assert ratio.between(0.95, 1.05).all(), ratio


def test_the_leaderboard_of_the_export_is_the_rankers_ranking(tmp_path):
    path = tmp_path / "r.sqlite"
    judged_store(path, tells=800)
    with Ranker(path, readonly=True) as ranker:
        ours = ranker.ranking()
        frame = battle_rows(ranker)
        assert (ours["se_method"] == "cluster").all()
    assert len(frame) == 800 and list(frame.columns[:5]) == ["model_a", "model_b", "winner", "judge", "side"]
    assert set(frame.winner) == {"model_a", "model_b", "tie", "tie (bothbad)"}
    assert frame.judge.str.startswith("#").sum() == sum(1 for k in range(800) if k % 7 == 0)
    assert set(frame.side.dropna()) == {"a", "b"} and frame.side.isna().sum() == sum(1 for k in range(800) if k % 3 == 2)
    for suffix in (".parquet", ".csv", ".jsonl"):
        out = tmp_path / f"battles{suffix}"
        done = subprocess.run([sys.executable, "-m", "study.online", "export", str(path), str(out)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert_same_ranking(ours, leaderboard_of(out, tmp_path))
    counts = export_told(path, tmp_path / "counts.parquet")  # one row per tell: the same leaderboard
    board = leaderboard_of(counts, tmp_path)
    np.testing.assert_allclose(board.loc[ours["name"], "score"], ours["score"], atol=0.01 * ours["se"].min())
    bad = subprocess.run([sys.executable, "-m", "study.online", "export", str(path), str(tmp_path / "b.xlsx")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "b.xlsx" in bad.stderr


def test_a_tell_of_m_comparisons_is_m_battles(tmp_path):
    path = tmp_path / "r.sqlite"
    with Ranker(path, n_items=3, dim=1, T=100, M=5, seed=1) as ranker:
        ranker.tell(ranker.ask([1.0]), 2, m=5, ties=2, bothbad=1)
        frame = battle_rows(ranker)
        assert sorted(frame.winner) == ["model_a", "model_b", "model_b", "tie", "tie (bothbad)"]
        assert (frame.judge == "#1").all() and frame.side.isna().all() and (frame.question_id == 1).all()


@pytest.fixture
def judged_server(tmp_path):
    from fastapi.testclient import TestClient

    path = tmp_path / "live.sqlite"
    with Ranker(path, items=["m-a", "m-b", "m-c", "m-d"], dim=1, T=4000, T0=100, seed=4):
        pass
    with TestClient(create_app(lambda: Ranker(path), token=TOKEN), base_url="http://127.0.0.1") as client:
        yield path, client


def test_two_named_judges_tell_through_their_own_tokens(judged_server, tmp_path):
    path, client = judged_server
    admin = {"Authorization": f"Bearer {TOKEN}"}
    tokens = {}
    for name in ("alice", "bob"):
        answer = client.post(f"{API}/judges", json={"name": name}, headers=admin)
        assert answer.status_code == 200, answer.text
        tokens[name] = answer.json()["token"]
    assert client.post(f"{API}/judges", json={"name": "alice"}, headers=admin).status_code == 409
    assert client.post(f"{API}/judges", json={"name": "eve"}).status_code == 401
    as_judge = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    assert client.post(f"{API}/judges", json={"name": "eve"}, headers=as_judge["alice"]).status_code == 403
    assert client.get(f"{API}/judges", headers=as_judge["alice"]).status_code == 403
    rng = np.random.default_rng(8)
    skill = np.array([1.0, 0.4, 0.0, -0.6])
    for k in range(450):  # two named judges, and the shared token (its tells: judge unknown)
        name = ("alice", "bob", None)[k % 3]
        headers = admin if name is None else as_judge[name]
        ticket = client.post(f"{API}/ask", json={"x": [1.0]}, headers=headers).json()
        p_other = 1 / (1 + np.exp(skill[ticket["major"]] - skill[ticket["other"]]))
        told = client.post(f"{API}/tell", json={"ticket": ticket["id"], "wins": int(rng.random() < p_other),
                                                "side": ("major", "other")[k % 2]}, headers=headers)
        assert told.status_code == 200, told.text
    listed = {row["name"]: row["tells"] for row in client.get(f"{API}/judges", headers=admin).json()}
    assert listed == {"alice": 150, "bob": 150}
    ranking = client.get(f"{API}/ranking", params={"se": "cluster"}).json()
    with Ranker(path, readonly=True) as ranker:
        ours = ranker.ranking(se="cluster")
    assert ranking["se_method"] == "cluster" and [row["se_method"] for row in ranking["rows"]] == ["cluster"] * 4
    np.testing.assert_allclose([row["se"] for row in ranking["rows"]], ours["se"], rtol=1e-12)
    assert client.get(f"{API}/ranking", params={"se": "auto"}).json()["se_method"] == "cluster"
    # the battle log over HTTP: the leaderboard of it is the ranker's ranking
    for fmt in ("jsonl", "csv", "parquet"):
        answer = client.get(f"{API}/battles", params={"format": fmt})
        assert answer.status_code == 200
        out = tmp_path / f"http.{fmt}"
        out.write_bytes(answer.content)
        assert_same_ranking(ours, leaderboard_of(out, tmp_path))
    frame = pd.read_json(io.BytesIO(client.get(f"{API}/battles").content), lines=True)
    assert set(frame.judge) - {"alice", "bob"} == {f"#{seq}" for seq in range(3, 451, 3)}
    assert set(frame.side) == {"a", "b"}
    # a revoked judge's token is refused
    assert client.post(f"{API}/judges/revoke", json={"name": "bob"}, headers=admin).status_code == 200
    assert client.post(f"{API}/ask", json={"x": [1.0]}, headers=as_judge["bob"]).status_code == 403
    assert client.post(f"{API}/ask", json={"x": [1.0]}, headers=as_judge["alice"]).status_code == 200
    verify_store(path, replay=True)


def test_export_told_takes_a_client_and_its_told_frame(judged_server, tmp_path):
    path, client = judged_server
    admin = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get(f"{API}/ranking", params={"se": "cluster"}).status_code == 409  # nothing asked yet
    outcomes = []
    for k in range(80):
        ticket = client.post(f"{API}/ask", json={"x": [1.0]}, headers=admin).json()
        outcomes.append({"ticket": ticket["id"], "wins": k % 2, "ties": int(k % 5 == 0 and k % 2 == 0)})
    assert client.post(f"{API}/tell_many", json={"outcomes": outcomes}, headers=admin).status_code == 200

    class HttpClient:  # what study.online.Client.told() returns, fetched through the test client
        def told(self):
            rows = client.get(f"{API}/told", params={"after": 0, "limit": 1000}).json()["rows"]
            return pd.DataFrame(rows)

    refused = client.get(f"{API}/ranking", params={"se": "cluster"})
    assert refused.status_code == 409 and "no named judge" in refused.json()["detail"]
    expected = told_rows(path)
    for source in (HttpClient(), HttpClient().told()):
        frame = told_rows(source)
        pd.testing.assert_frame_equal(frame.drop(columns="explored"), expected.drop(columns="explored"),
                                      check_dtype=False)
        out = export_told(source, tmp_path / "told.csv")
        assert len(leaderboard_of(out, tmp_path)) == 4
    with pytest.raises(TypeError, match="told_rows takes"):
        told_rows(42)
    with pytest.raises(ValueError, match="Client.told"):
        told_rows(pd.DataFrame({"seq": [1]}))
    export_battles(path, tmp_path / "b.jsonl")
