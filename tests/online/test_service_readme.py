"""The README's service blocks, run as written (the docs tests skip them: the first starts a
server in the background): the server started by the bash block, the loop of the python block in
a second process through the client; the only change is a free port in place of 8000, so that the
test cannot meet another server on this machine."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "docs"))
from mdblocks import blocks  # noqa: E402

from study.online import verify_store  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_readme_starts_a_server_and_a_second_process_runs_the_loop_through_the_client(tmp_path):
    found = [b for b in blocks(ROOT / "README.md") if "test_service_readme.py" in b.reason]
    assert [b.language for b in found] == ["bash", "python"], found
    port = str(free_port())
    command = found[0].code.strip()
    assert command.endswith("&") and command.count("\n") == 0 and "8000" not in command  # the default port
    command = command.rstrip("&").strip() + f" --port {port}"
    script = found[1].code
    assert script.count("http://127.0.0.1:8000") == 1
    (tmp_path / "loop.py").write_text(script.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}"))
    (tmp_path / "outputs").mkdir()  # a checkout has it (outputs/reference/ is committed)
    env = {k: v for k, v in os.environ.items() if k != "STUDY_ONLINE_TOKEN"}
    # the block says `python`: the interpreter running the tests, whether or not its venv is activated
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=5):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
                time.sleep(0.2)
        loop = subprocess.run([sys.executable, "loop.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert loop.returncode == 0, loop.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert b"Leaderboard" in page.read()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    lines = loop.stdout.splitlines()
    assert all(name in loop.stdout for name in ("model-a", "model-e", "lower", "upper", "se"))
    assert "after 300 judgments" in lines[-1]
    assert verify_store(tmp_path / "outputs" / "service.sqlite", replay=True)["counts"]["told"] == 300
    assert server.returncode == 0
