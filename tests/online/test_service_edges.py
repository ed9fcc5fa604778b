"""The service's rough edges, each with what it does now: an index at /api/v1/, integers beyond
SQLite's refused with 422, a foreign Host refused (DNS rebinding), half-open connections timed out,
a second server on a store refused at start, a short environment token refused, the addresses of
a server on every interface printed, and item names with matplotlib's mathtext ($...$) drawn as
text."""
import os
import resource
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from study.online import Client, Ranker, verify_store
from study.online.service.hardening import allowed_hosts, host_name, lock_file, machine_addresses, reachable
from study.online.service.server import create_app

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
from service_support import TOKEN, Serve  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
API = "/api/v1"
NEW = ["--items", "a", "b", "c", "--dim", "2", "--T", "100", "--seed", "4"]
BIG = 2**63


def make_store(path, items=("model-a", "model-b", "model-c"), told=40):
    rng = np.random.default_rng(3)
    with Ranker(path, items=list(items), dim=2, T=200, T0=20, seed=2) as ranker:
        for _ in range(told):
            ticket = ranker.ask([1.0, rng.normal(0, 0.3)])
            ranker.tell(ticket, wins=int(rng.random() < 0.5 + 0.2 * (ticket.other - ticket.major) / 2))
    return path


@contextmanager
def served(store, base_url="http://127.0.0.1", **options):
    from fastapi.testclient import TestClient

    with TestClient(create_app(lambda: Ranker(store), token=TOKEN, **options), base_url=base_url) as client:
        yield client


def serve(*args, env=None, timeout=120):
    environment = {k: v for k, v in os.environ.items() if k != "STUDY_ONLINE_TOKEN"}
    return subprocess.run([sys.executable, "-m", "study.online", "serve", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**environment, **(env or {})})


def test_the_api_link_printed_at_start_is_an_index_of_the_routes(tmp_path):
    with served(make_store(tmp_path / "r.sqlite")) as client:
        for path in (f"{API}/", API):
            answer = client.get(path)
            assert answer.status_code == 200, path
            index = answer.json()
            assert index["schema"] == f"{API}/openapi.json" and index["api"] == "v1"
            assert {"method": "POST", "path": f"{API}/tell", "summary": "one outcome (one transaction)"} in index["routes"]
            assert {r["path"] for r in index["routes"]} >= {f"{API}/ranking", f"{API}/told", f"{API}/health"}
    with served(tmp_path / "r.sqlite", reads_need_token=True) as client:  # it names routes only: no token
        assert client.get(f"{API}/").status_code == 200 and client.get(f"{API}/state").status_code == 401


@pytest.mark.parametrize("route, method, payload, loc", [
    ("told", "get", {"after": BIG}, ["query", "after"]),
    ("decision", "get", {"top": BIG}, ["query", "top"]),
    ("tell", "post", {"ticket": BIG, "wins": 1}, ["body", "ticket"]),
    ("tell", "post", {"ticket": 1, "wins": 0, "ties": 0, "m": BIG}, ["body", "m"]),
    ("tell", "post", {"ticket": 1, "wins": 1, "major": BIG, "other": 0}, ["body", "major"]),
    ("expire", "post", {"ticket": BIG}, ["body", "ticket"]),
    ("tell_many", "post", {"outcomes": [{"ticket": BIG, "wins": 0}]}, ["body", "outcomes", 0, "ticket"]),
])
def test_integers_beyond_sqlite_are_a_422_naming_the_field(tmp_path, route, method, payload, loc):
    store = make_store(tmp_path / "r.sqlite")
    with served(store) as client:
        if method == "get":
            answer = client.get(f"{API}/{route}", params=payload)
        else:
            answer = client.post(f"{API}/{route}", json=payload, headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert loc in [e["loc"] for e in answer.json()["detail"]]
    verify_store(store)


def test_a_foreign_host_is_refused_before_any_route():
    assert host_name("[::1]:8000") == "::1" and host_name("LocalHost:80") == "localhost" and host_name("a.b") == "a.b"
    assert allowed_hosts("127.0.0.1")[:3] == ["localhost", "127.0.0.1", "::1"]
    assert "10.1.2.3" in allowed_hosts("10.1.2.3") and "proxy.example" in allowed_hosts("127.0.0.1", ["proxy.example"])


def test_the_host_gate_over_http(tmp_path):
    store = make_store(tmp_path / "r.sqlite")
    with served(store, base_url="http://rebound.attacker.example:8000") as client:
        for path in ("/", f"{API}/state", f"{API}/told", f"{API}/health"):
            answer = client.get(path)
            assert answer.status_code == 400 and "serve --allow-host" in answer.json()["detail"], path
        assert client.post(f"{API}/ask", json={"x": [1.0, 0.0]}, headers=AUTH).status_code == 400
        assert client.get(f"{API}/state", headers={"Host": "localhost:8000"}).status_code == 200
        assert client.get(f"{API}/state", headers={"Host": "[::1]:8000"}).status_code == 200
    with served(store, base_url="http://proxy.example", allowed_hosts=["proxy.example"]) as client:
        assert client.get(f"{API}/state").status_code == 200
    with served(store, base_url="http://anything.example", allowed_hosts=["*"]) as client:
        assert client.get(f"{API}/state").status_code == 200
    verify_store(store)


def test_a_second_server_on_a_store_is_refused_at_start_and_a_killed_one_leaves_no_stale_lock(tmp_path):
    store = tmp_path / "board.sqlite"
    with Serve(store, *NEW) as first:
        refused = serve(store, env={"STUDY_ONLINE_TOKEN": TOKEN})
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "already served" in refused.stderr
        assert f"pid {first.process.pid}" in refused.stderr and first.url in refused.stderr
        with Client(first.url, token=TOKEN) as client:  # the first is untouched
            client.tell(client.ask([1.0, 0.0]), wins=1)
        first.kill()  # kill -9: the kernel drops the lock with the process
        with Serve(store) as second, Client(second.url, token=TOKEN) as client:
            assert client.n_told == 1
    assert lock_file(store).exists()
    with Serve(store):  # a clean stop released it too
        pass


def test_a_short_environment_token_is_refused(tmp_path):
    refused = serve(tmp_path / "s.sqlite", *NEW, env={"STUDY_ONLINE_TOKEN": "x"})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "STUDY_ONLINE_TOKEN: a token needs at least 16 characters, got 1" in refused.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_on_every_interface_it_prints_addresses_another_machine_can_open(tmp_path):
    assert reachable("127.0.0.1", 8000) == [] and reachable("10.1.2.3", 80) == ["http://10.1.2.3:80/"]
    with Serve(tmp_path / "board.sqlite", *NEW, "--host", "0.0.0.0") as server:
        lines = [server.first_line] + [server.process.stdout.readline() for _ in range(3)]
        assert "0.0.0.0" not in server.url and server.url.startswith("http://127.0.0.1:")
        elsewhere = [line for line in lines if "from other machines" in line]
        assert elsewhere and "listening on every interface, 0.0.0.0" in elsewhere[0]
        if not machine_addresses():  # a machine with no name and no route out (a CI sandbox may be one)
            assert "no address of this machine found" in elsewhere[0]
            return
        urls = elsewhere[0].split(": ", 1)[1].split(" (")[0].split()
        assert urls and all(u.startswith("http://") and f":{server.port}/" in u and "0.0.0.0" not in u for u in urls)
        with Client(server.url, token=TOKEN) as client:  # its own printed addresses are allowed hosts
            name = urls[0].split("//")[1].rsplit(":", 1)[0]
            conn = __import__("http.client").client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", "/api/v1/health", headers={"Host": f"{name}:{server.port}",
                                                          "Authorization": f"Bearer {TOKEN}"})
            assert conn.getresponse().status == 200
            conn.close()
            assert client.n_told == 0


def half_open(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /api/v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
    return sock


def test_half_open_connections_are_closed_and_others_are_served(tmp_path):
    """The server runs with 200 file descriptors and a 1 s header deadline; 300 connections that
    send half a request's headers would use them all up: the deadline closes them, and a
    normal request is answered (before the fix it never was)."""
    store = tmp_path / "board.sqlite"
    limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))  # noqa: E731
    env = {**os.environ, "STUDY_ONLINE_TOKEN": TOKEN}
    process = subprocess.Popen([sys.executable, "-m", "study.online", "serve", str(store), "--port", "0",
                                "--header-timeout", "1", *NEW], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, preexec_fn=limit)
    sockets = []
    try:
        first = process.stdout.readline()
        url = first.split(" at ")[1].split()[0].rstrip("/")
        port = int(url.rsplit(":", 1)[1])
        sockets = [half_open(port) for _ in range(300)]  # the kernel's backlog takes what accept() cannot
        answered, deadline = None, time.monotonic() + 60
        while answered is None and time.monotonic() < deadline:
            try:
                with Client(url, token=TOKEN, timeout=5, retry_for=0) as client:
                    answered = client.counts()
            except (ConnectionError, OSError):
                time.sleep(0.5)
        assert answered is not None and answered["told"] == 0
        closed = 0
        for sock in sockets[:20]:  # the first ones were accepted, and closed at their deadline
            sock.settimeout(10)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == 20
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.wait(timeout=60)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == 0


NAMES = ["$\\foo$", "a $x^{2", "b_$1$_c"]


def test_item_names_with_mathtext_are_drawn_as_text(tmp_path):
    store = make_store(tmp_path / "r$1$.sqlite", items=NAMES, told=60)
    with served(store) as client:
        svg = client.get(f"{API}/diagram.svg")
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
        for image in ("svg", "png"):
            answer = client.post(f"{API}/diagram", json={"contexts": [[1.0, 0.0]], "uncertainty": False,
                                                         "image": image})
            assert answer.status_code == 200 and answer.json()["image"]
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(store), "--png", str(tmp_path / "d.png")],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "$\\foo$" in shown.stdout and (tmp_path / "d.png").read_bytes().startswith(b"\x89PNG")


def test_the_leaderboards_figures_draw_such_names_as_text(tmp_path):
    rng = np.random.default_rng(4)
    lines = ["model_a,model_b,winner"]
    for _ in range(300):
        a, b = rng.choice(len(NAMES), 2, replace=False)
        lines.append(f'"{NAMES[a]}","{NAMES[b]}",{rng.choice(["model_a", "model_b", "tie"])}')
    (tmp_path / "b$1$.csv").write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "study.leaderboard", str(tmp_path / "b$1$.csv"), "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for figure in ("scores.png", "win_rates.png"):
        assert (tmp_path / "out" / figure).read_bytes().startswith(b"\x89PNG")
