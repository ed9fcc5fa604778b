"""The judging page wired into the service: the server's app with a pool identifies judges by their
tokens of the store (through the token gate), tells carry the judge, the side shown on the left and
both-bad; the admin token, a revoked judge's token and no token are refused and change nothing; a
judge is never served the same prompt twice; ``serve`` refuses bad pool files in one line before
anything starts; the export and ``judges report`` read the store with the page's log."""
import functools
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from study.online import Ranker, judges
from study.online.export import battle_rows
from study.online.service.judging_log import report_rows, with_prompts
from study.online.service.server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import TOKEN  # noqa: E402
from test_judge_routes import MODELS, make_pool  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
ROOT = Path(__file__).resolve().parents[2]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_store_judges_vote_through_the_gate_with_sides_and_bothbad(tmp_path):
    from fastapi.testclient import TestClient

    pool = make_pool(tmp_path, prompts=24)
    store, log = tmp_path / "r.sqlite", tmp_path / "r.sqlite.judging.jsonl"
    with Ranker(store, items=MODELS, dim=pool.contexts.shape[1], T=500, T0=40, seed=2) as ranker:
        ann, bob = judges.add(ranker, "ann"), judges.add(ranker, "bob")
    app = create_app(lambda: Ranker(store), token=TOKEN, pool=pool, judging_log=log, overlap=0.0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        service = app.state.service
        assert client.get("/api/v1/battle/next").status_code == 401
        assert client.get("/api/v1/battle/next", headers=bearer(TOKEN)).status_code == 403  # the admin is no judge
        assert client.get("/api/v1/battle/next", headers=bearer("x" * 40)).status_code == 403
        service._thread.submit(functools.partial(judges.revoke, service.ranker, "bob")).result()
        assert client.get("/api/v1/battle/next", headers=bearer(bob)).status_code == 403
        assert client.get("/api/v1/judges/report", headers=bearer(bob)).status_code == 403
        assert service._thread.submit(lambda: service.ranker.counts()["asked"]).result() == 0  # nothing changed
        schema = client.get("/api/v1/openapi.json").json()
        assert schema["paths"]["/api/v1/battle/vote"]["post"]["security"] == [{"HTTPBearer": []}]
        choices = ["left", "right", "tie", "bothbad"] * 6
        for choice in choices:
            battle = client.get("/api/v1/battle/next", headers=bearer(ann)).json()
            answer = client.post("/api/v1/battle/vote", headers=bearer(ann),
                                 json={"battle": battle["battle"], "choice": choice})
            assert answer.status_code == 200 and answer.json()["recorded"]
        assert client.get("/api/v1/battle/next", headers=bearer(ann)).json()["done"] is True
        assert client.get("/api/v1/judges/report", headers=bearer(ann)).status_code == 200
    votes = pd.read_json(log, lines=True)
    stored = battle_rows(store)
    assert stored["judge"].tolist() == ["ann"] * 24 and votes["question_id"].nunique() == 24
    left = [a if side == "a" else b for a, b, side in zip(stored.model_a, stored.model_b, stored.side)]
    assert left == votes["left"].tolist()
    # the store's winner, of its own (major, other) order, is the judge's of the (left, right) order
    for (_, row), (_, vote) in zip(stored.iterrows(), votes.iterrows()):
        flipped = row["side"] == "b"
        expected = {"model_a": "model_b", "model_b": "model_a"}.get(vote["winner"], vote["winner"]) if flipped \
            else vote["winner"]
        assert row["winner"] == expected
    assert stored["winner"].eq("tie (bothbad)").sum() == 6
    named = with_prompts(stored, log)
    assert named["question_id"].tolist() == votes["question_id"].tolist()
    assert named["ticket"].tolist() == stored["question_id"].tolist()
    assert len(report_rows(stored, log)) == 24


def run(*args):
    return subprocess.run([sys.executable, "-m", "study.online", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_serve_refuses_bad_pool_files_in_one_line_before_it_starts(tmp_path):
    make_pool(tmp_path, prompts=6)
    store = tmp_path / "r.sqlite"
    (tmp_path / "bad.jsonl").write_text('{"question_id": "q1"}\n')
    cases = [(["--prompts", tmp_path / "bad.jsonl", "--responses", tmp_path / "responses.jsonl"], "prompt"),
             (["--prompts", tmp_path / "prompts.jsonl", "--responses", tmp_path / "nothing.jsonl"], "nothing.jsonl"),
             (["--prompts", tmp_path / "prompts.jsonl"], "--responses")]
    for flags, named in cases:
        done = run("serve", store, *flags, "--port", "0")
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
        assert not store.exists()
    Ranker(store, items=MODELS[:3], dim=3, T=50, T0=10).close()  # no item delta
    done = run("serve", store, "--prompts", tmp_path / "prompts.jsonl", "--responses", tmp_path / "responses.jsonl",
               "--category", "category", "--port", "0")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "'delta'" in done.stderr, done.stderr
