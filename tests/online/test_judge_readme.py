"""The README's judging demo, run as written (the docs tests skip its server blocks): the stand-in
pool written by its python block, the server started by its first bash block, a judge named by the
second; then the judge votes through the page's routes with the token the block printed, and the
store holds the votes with the judge and the sides.  The only change is a free port in place of
8000, so that the test cannot meet another server on this machine."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "docs"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mdblocks import blocks  # noqa: E402
from test_service_readme import free_port  # noqa: E402

from study.online.export import battle_rows  # noqa: E402


def request(url, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Authorization": f"Bearer {token}",
                                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.loads(answer.read())


def test_the_readme_serves_a_pool_and_a_named_judge_votes(tmp_path):
    found = [b for b in blocks(ROOT / "README.md") if "test_judge_readme.py" in b.reason]
    assert [b.language for b in found] == ["bash", "bash"], found
    pool = [b for b in blocks(ROOT / "README.md") if "Stand-in prompt" in b.code]
    assert len(pool) == 1 and pool[0].directive == ""  # the docs tests run it too
    port = str(free_port())
    command = found[0].code.strip()
    assert command.endswith("&") and command.count("\n") == 0 and "8000" not in command
    command = command.rstrip("&").strip() + f" --port {port}"
    assert found[1].code.count("http://127.0.0.1:8000/judge#token=") == 1
    (tmp_path / "outputs").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "STUDY_ONLINE_TOKEN"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-"], input=pool[0].code, cwd=tmp_path, env=env, check=True, timeout=120,
                   text=True)
    server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v1/health", timeout=5):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
                time.sleep(0.2)
        named = subprocess.run(["bash", "-e", "-c", found[1].code], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
        assert named.returncode == 0, named.stderr
        token = named.stdout.split()[-1]
        with urllib.request.urlopen(f"{url}/judge", timeout=10) as page:
            assert b"judge" in page.read()
        seen = []
        for choice in ["left", "right", "tie", "bothbad", "left", "right"]:
            battle = request(f"{url}/api/v1/battle/next", token)
            seen.append(battle["question_id"])
            answer = request(f"{url}/api/v1/battle/vote", token, {"battle": battle["battle"], "choice": choice})
            assert answer["recorded"] and answer["left_model"].startswith("model-")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert server.returncode == 0, server.stderr.read()
    assert len(set(seen)) == len(seen)
    stored = battle_rows(tmp_path / "outputs" / "arena.sqlite")
    told = len(stored)  # a re-served battle (10%) is the log's only; the first judge has nobody to re-serve
    assert told == 6 and set(stored["judge"]) == {"ann"} and stored["side"].notna().all()
