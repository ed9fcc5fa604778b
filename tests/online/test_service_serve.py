"""``python -m study.online serve``: the store created from flags or a settings file, or reopened;
the token generated at the first start into a file only its owner can read (or taken from
STUDY_ONLINE_TOKEN); reads open on loopback only; clear refusals (exit 2) before anything is
served; a SIGTERM stops it with the store verified."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from study.online import Client, Ranker, verify_store
from study.online.service.serve import reads_need_the_token, token_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import Serve  # noqa: E402

NEW = ["--items", "a", "b", "c", "--dim", "2", "--T", "100", "--seed", "4"]


def serve(*args, env=None, timeout=120):
    environment = {k: v for k, v in os.environ.items() if k != "STUDY_ONLINE_TOKEN"}
    return subprocess.run([sys.executable, "-m", "study.online", "serve", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**environment, **(env or {})})


def test_the_first_start_writes_a_token_only_its_owner_reads_and_the_next_reuses_it(tmp_path):
    store = tmp_path / "board.sqlite"
    with Serve(store, *NEW, env={}) as server:
        assert "token: " + str(token_file(store)) in server.first_line + server.process.stdout.readline() \
            + server.process.stdout.readline()
        token = token_file(store).read_text().strip()
        assert len(token) >= 40 and stat.S_IMODE(token_file(store).stat().st_mode) == 0o600
        with Client(server.url, token=token) as client:
            client.tell(client.ask([1.0, 0.5]), wins=1)
    with Serve(store, env={}) as server, Client(server.url, token=token) as client:  # reopened: the same token
        assert client.n_told == 1 and client.config["items"] == ["a", "b", "c"]
        client.tell(client.ask([1.0, 0.5]), wins=0)
    assert server.process.returncode == 0  # SIGTERM: a clean stop
    assert verify_store(store, replay=True)["counts"]["told"] == 2
    token_file(store).chmod(0o644)
    refused = serve(store)
    assert refused.returncode == 2 and "readable by others" in refused.stderr and "chmod 600" in refused.stderr


def test_the_token_may_come_from_the_environment(tmp_path):
    store = tmp_path / "board.sqlite"
    with Serve(store, *NEW, env={"STUDY_ONLINE_TOKEN": "from-the-environment-123"}) as server:
        assert "STUDY_ONLINE_TOKEN" in server.process.stdout.readline() + server.process.stdout.readline()
        with Client(server.url, token="from-the-environment-123") as client:
            client.ask([1.0, 0.0])
    assert not token_file(store).exists()


def test_a_settings_file_creates_the_store_and_flags_must_agree_with_it(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"items": ["x", "y", "z", "w"], "dim": 3, "T": 200, "policy": "RB", "seed": 9}))
    store = tmp_path / "s.sqlite"
    with Serve(store, "--settings", settings, "--T", 200):
        pass
    with Ranker(store, readonly=True) as reader:
        assert reader.config.labels == ["x", "y", "z", "w"] and reader.config.T == 200 and reader.config.dim == 3
    for args, message in [
        (("--settings", settings, "--T", 300), "T is given by a flag (300) and by --settings (200)"),
        (("--T", 100), "T: stored 200, given 100"),  # (a larger T raises the horizon)
        (("--settings", tmp_path / "missing.json"), "--settings"),
    ]:
        refused = serve(store, *args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    (tmp_path / "bad.json").write_text(json.dumps({"items": ["a", "b"], "dimension": 3}))
    refused = serve(tmp_path / "new.sqlite", "--settings", tmp_path / "bad.json")
    assert refused.returncode == 2 and "unknown argument 'dimension'" in refused.stderr
    refused = serve(tmp_path / "absent.sqlite")
    assert refused.returncode == 2 and "give its creation arguments" in refused.stderr
    assert not (tmp_path / "new.sqlite").exists() and not (tmp_path / "absent.sqlite").exists()


def test_a_busy_port_is_refused_with_one_line(tmp_path):
    with Serve(tmp_path / "one.sqlite", *NEW) as server:
        refused = serve(tmp_path / "two.sqlite", *NEW, "--port", server.port)
    assert refused.returncode == 2 and "in use" in refused.stderr


def test_reads_are_open_on_loopback_only_unless_opened():
    assert not reads_need_the_token("127.0.0.1", False) and not reads_need_the_token("::1", False)
    assert reads_need_the_token("0.0.0.0", False) and reads_need_the_token("10.1.2.3", False)
    assert not reads_need_the_token("0.0.0.0", True)
