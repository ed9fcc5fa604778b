"""Servers for the service tests (tests/online/test_service_*.py): an app on uvicorn in a thread of
the test process, ``python -m study.online serve`` in a process of its own, a simulated judge."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

TOKEN = "test-token-0123456789abcdef"
ITEMS = ["model-a", "model-b", "model-c", "model-d", "model-e"]
SKILL = np.array([2.0, 1.0, 0.0, -1.0, -2.0])


def judge_outcome(ticket, rng) -> int:
    """1 when ``other`` wins, by Bradley-Terry on SKILL."""
    p_other = 1.0 / (1.0 + np.exp(SKILL[ticket.major] - SKILL[ticket.other]))
    return int(rng.random() < p_other)


def creation(T: int = 400, dim: int = 3, seed: int = 1) -> dict:
    return dict(items=ITEMS, dim=dim, T=T, T0=T // 4, seed=seed)


@contextmanager
def threaded_server(open_ranker, *, token: str = TOKEN, reads_need_token: bool = False, max_body=None):
    """The app on uvicorn in a thread of this process (its ranker opened by ``open_ranker`` in that
    thread); yields the URL, stops it on exit."""
    import uvicorn

    from study.online.service.serve import listening_socket
    from study.online.service.server import MAX_BODY, create_app

    app = create_app(open_ranker, token=token, reads_need_token=reads_need_token, max_body=max_body or MAX_BODY)
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the threaded server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class Serve:
    """``python -m study.online serve STORE ARGS`` in a process of its own: started, killed, restarted."""

    def __init__(self, store, *args, env=None, port: int = 0):
        self.store, self.args, self.port, self.process = Path(store), [str(a) for a in args], port, None
        self.env = {**os.environ, **(env if env is not None else {"STUDY_ONLINE_TOKEN": TOKEN})}
        self.first_line = ""

    def start(self) -> str:
        self.process = subprocess.Popen([sys.executable, "-m", "study.online", "serve", str(self.store), "--port",
                                         str(self.port), *self.args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=self.env)
        self.first_line = self.process.stdout.readline()
        if " at http://" not in self.first_line:
            self.process.wait(timeout=60)
            raise RuntimeError(f"serve did not start: {self.first_line!r} {self.process.stderr.read()}")
        self.url = self.first_line.split(" at ")[1].split()[0].rstrip("/")
        self.port = int(self.url.rsplit(":", 1)[1])
        return self.url

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


class LosingProxy:
    """A TCP proxy in front of a server that loses the answer to the first request whose first line
    starts with ``lose`` (the request reaches the server and is carried out; the client's
    connection is then closed without an answer): a crash between the commit and the reply."""

    def __init__(self, target_port: int, lose: bytes):
        import socket

        self.target, self.lose, self.lost = target_port, lose, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _message(conn) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return b""
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _serve(self, client, upstream) -> None:
        with client, upstream:
            while True:
                request = self._message(client)
                if not request:
                    return
                upstream.sendall(request)
                answer = self._message(upstream)
                if request.startswith(self.lose) and not self.lost:
                    self.lost += 1
                    return  # the answer is lost: the client's connection closes
                client.sendall(answer)

    def close(self) -> None:
        self.sock.close()
