"""The judging page in a real browser (Debian's chromium driven by Playwright), on the real server:
``python -m study.online serve STORE --prompts FILE --responses FILE`` in its own process, two judges
named by ``python -m study.online judges add``, each with its own token, in two browser contexts,
voting 30 battles each, one by clicks and one by keys 1-4, at phone width (390 px: no sideways
scroll) and desktop width; the names appear only after each vote; no judge is shown a prompt twice;
the store holds both judges, their sides and times (its export), the page's log the pool's question
ids; no console error.

Skipped, saying why, where chromium or Playwright is missing, unless CI=true (test_service_browser)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd

from study.online import Ranker
from study.online.export import battle_rows

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_judge_routes import MODELS, make_pool  # noqa: E402
from test_service_browser import ARGS, CHROMIUM, playwright_or_skip  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LONG = "\n\n".join(["A long paragraph of the response that goes on and on. " * 6] * 30)


def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "STUDY_ONLINE_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def cli(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "study.online", *map(str, args)], capture_output=True, text=True,
                          env=environment(), timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def serve(*args):
    """The real ``serve`` on a free port: (process, url)."""
    server = subprocess.Popen([sys.executable, "-m", "study.online", "serve", *map(str, args), "--port", "0"],
                              env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    first = server.stdout.readline()  # "serving STORE (...) at http://127.0.0.1:PORT/"
    found = re.search(r" at (http://127\.0\.0\.1:\d+)/", first)
    if found is None:
        server.kill()
        raise AssertionError(f"serve did not start: {first}{server.stderr.read()}")
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{found.group(1)}/api/v1/health", timeout=5):
                return server, found.group(1)
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
            time.sleep(0.2)


def test_two_judges_vote_by_clicks_and_keys(tmp_path):
    sync_playwright = playwright_or_skip()
    pool = make_pool(tmp_path, prompts=45)  # writes prompts.jsonl and responses.jsonl
    responses = pd.read_json(tmp_path / "responses.jsonl", lines=True)
    long = responses["model"].eq("alpha") & responses["question_id"].isin(pool.question_ids[:15])
    responses.loc[long, "response"] += ("\n\n```python\n" + "x = 1  # a long line of code " * 12 + "\n```\n\n"
                                        + LONG)  # long responses and code must scroll inside their box
    responses.to_json(tmp_path / "responses.jsonl", orient="records", lines=True)
    store = tmp_path / "r.sqlite"
    Ranker(store, items=MODELS, dim=pool.contexts.shape[1], T=500, T0=40, seed=2).close()
    judges = {cli("judges", "add", store, name).split()[-1]: name for name in ("ann", "bob")}
    server, url = serve(store, "--prompts", tmp_path / "prompts.jsonl", "--responses", tmp_path / "responses.jsonl",
                        "--category", "category")
    errors = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for (token, name), width, by_keys in zip(judges.items(), (390, 1280), (False, True)):
                context = browser.new_context(viewport={"width": width, "height": 800})
                page = context.new_page()
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(f"{url}/judge#token={token}")
                assert "#token" not in page.url  # the token leaves the address bar
                long_ones = 0
                for k in range(30):
                    page.wait_for_function(f"window.studyJudge.shown.length === {k + 1} && "
                                           "!document.querySelector('#battle').hidden")
                    assert not page.is_visible("#token-form")  # a token from #token=, accepted: no token box
                    assert page.inner_text("#left-name") == "" and page.inner_text("#right-name") == ""
                    # a long response scrolls inside its box: the box stays within 60% of the window
                    assert page.evaluate("[...document.querySelectorAll('.response')].every(e => "
                                         "e.clientHeight <= 0.61 * innerHeight)")
                    long_ones += page.evaluate("[...document.querySelectorAll('.response')].filter(e => "
                                               "e.scrollHeight > e.clientHeight + 100).length")
                    if width == 390:
                        wide = page.evaluate("document.documentElement.scrollWidth - "
                                             "document.documentElement.clientWidth")
                        assert wide <= 0, f"{wide} px of sideways scroll at 390 px"
                    if by_keys:
                        page.keyboard.press("1234"[k % 4])
                    else:
                        page.click(f"button[data-choice={['left', 'right', 'tie', 'bothbad'][k % 4]}]")
                    page.wait_for_function(f"window.studyJudge.votes === {k + 1}")
                    revealed = page.inner_text("#revealed")
                    assert sum(m in revealed for m in MODELS) == 2, revealed
                assert long_ones >= 1  # (alpha's 15 long responses: some were shown)
                page.wait_for_function("window.studyJudge.shown.length === 31")  # the next one, at once
                shown = page.evaluate("window.studyJudge.shown")
                assert len(set(shown)) == len(shown) == 31
                context.close()
            # a refused token: the token box stays, with the refusal (its 403 is a console error by design)
            context = browser.new_context(viewport={"width": 390, "height": 800})
            page = context.new_page()
            page.goto(f"{url}/judge#token=not-a-judge")
            page.wait_for_function("!document.querySelector('#token-form').hidden")
            assert page.is_visible("#token-input") and "token" in page.inner_text("#token-error")  # the refusal shown
            context.close()
            # the leaderboard page with the server's token: the Judges card, as the API reports
            admin = (tmp_path / "r.sqlite.token").read_text().strip()
            request = urllib.request.Request(f"{url}/api/v1/judges/report",
                                             headers={"Authorization": f"Bearer {admin}"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                report = json.load(answer)
            votes = {j["judge"]: j["votes"] for j in report["judges"]}
            assert set(votes) == {"ann", "bob"}
            context = browser.new_context(viewport={"width": 390, "height": 800})
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/#token={admin}")
            page.wait_for_function("!document.querySelector('#judges-card').hidden && "
                                   "document.querySelectorAll('#judges tbody tr').length === 2")
            shown = {tr[0]: int(tr[1].replace(",", "")) for tr in page.evaluate(
                "[...document.querySelectorAll('#judges tbody tr')].map(r => [...r.cells].map(c => c.textContent))")}
            assert shown == votes
            assert "α" in page.inner_text("#judges-overall") and "left wins" in page.inner_text("#judges-overall")
            wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert wide <= 0, f"{wide} px of sideways scroll at 390 px with the Judges card"
            context.close()
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert server.returncode == 0, server.stderr.read()
    assert errors == []
    rows = pd.read_json(tmp_path / "r.sqlite.judging.jsonl", lines=True)  # the page's log
    assert rows.groupby("judge").size().to_dict() == {"ann": 30, "bob": 30}
    assert not rows.duplicated(["judge", "question_id"]).any()
    assert not rows.assign(pair=[frozenset(p) for p in zip(rows.model_a, rows.model_b)]).duplicated(
        ["judge", "question_id", "pair"]).any()
    assert (rows["left"] == rows["model_a"]).all() and rows["seconds"].notna().all()
    assert rows["tstamp"].is_monotonic_increasing
    assert rows["winner"].tolist()[:4] == ["model_a", "model_b", "tie", "tie (bothbad)"]
    told = rows[rows["ticket"].notna()]  # the re-served battles are the log's only
    stored = battle_rows(store)  # the store: every told vote with its judge, side and time
    assert len(stored) == len(told) and set(stored["judge"]) == {"ann", "bob"}
    assert stored["judge"].tolist() == told["judge"].tolist()
    assert stored["question_id"].tolist() == told["ticket"].astype(int).tolist()
    left = [a if side == "a" else b for a, b, side in zip(stored.model_a, stored.model_b, stored.side)]
    assert left == told["left"].tolist()  # the side the store holds is the model shown on the left
    assert stored["tstamp"].sub(told["tstamp"].to_numpy()).abs().max() < 5
    bothbad = told["winner"].eq("tie (bothbad)").to_numpy()
    assert (stored["winner"].eq("tie (bothbad)").to_numpy() == bothbad).all()
    exported = tmp_path / "battles.csv"
    cli("export", store, exported)
    battles = pd.read_csv(exported)
    assert battles["question_id"].astype(str).tolist() == told["question_id"].astype(str).tolist()
    assert {"judge", "side", "question_id", "tstamp"} <= set(battles.columns)
    report = cli("judges", "report", store)
    assert "ann" in report and "bob" in report
