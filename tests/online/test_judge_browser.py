"""The judging page in a real browser (Debian's chromium driven by Playwright), on the server's app
with the judging routes included: two judges in two browser contexts vote 30 battles each, one by
clicks and one by keys 1-4, at phone width (390 px: no sideways scroll) and desktop width; the
names appear only after each vote; no judge is shown a prompt twice; the log holds both judges,
their sides and times; no console error.

Skipped, saying why, where chromium or Playwright is missing, unless CI=true (test_service_browser)."""
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from study.online import Ranker
from study.online.judge_routes import judge_router, tokens
from study.online.server import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import TOKEN  # noqa: E402
from test_judge_routes import JUDGES, MODELS, make_pool  # noqa: E402
from test_service_browser import ARGS, CHROMIUM, playwright_or_skip  # noqa: E402

LONG = "\n\n".join(["A long paragraph of the response that goes on and on. " * 6] * 30)


def serve(app):
    import uvicorn

    from study.online.serve import listening_socket
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_two_judges_vote_by_clicks_and_keys(tmp_path):
    sync_playwright = playwright_or_skip()
    pool = make_pool(tmp_path, prompts=45)
    for q in pool.question_ids[:15]:  # long responses and code must scroll inside their box
        pool.responses[q]["alpha"] += "\n\n```python\n" + "x = 1  # a long line of code " * 12 + "\n```\n\n" + LONG
    store = tmp_path / "r.sqlite"
    Ranker(store, items=MODELS, dim=pool.contexts.shape[1], T=500, T0=40, seed=2).close()
    app = create_app(lambda: Ranker(store), token=TOKEN)
    app.include_router(judge_router(pool, identify=tokens(JUDGES), log=tmp_path / "votes.jsonl", overlap=0.1))
    server, thread, url = serve(app)
    errors = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for (token, name), width, by_keys in zip(JUDGES.items(), (390, 1280), (False, True)):
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
            browser.close()
    finally:
        server.should_exit = True
        thread.join(30)
    assert errors == []
    rows = pd.read_json(tmp_path / "votes.jsonl", lines=True)
    assert rows.groupby("judge").size().to_dict() == {"ann": 30, "bob": 30}
    assert not rows.duplicated(["judge", "question_id"]).any()
    assert (rows["left"] == rows["model_a"]).all() and rows["seconds"].notna().all()
    assert rows["tstamp"].is_monotonic_increasing
    assert rows["winner"].tolist()[:4] == ["model_a", "model_b", "tie", "tie (bothbad)"]
