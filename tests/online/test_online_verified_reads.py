"""Issue 35: every read of a store verifies it as a writable open does.  ``show`` and read-only
opens trusted a tampered store that ``verify`` and a writable open refused (an altered estimate
row, a bit flip of theta inside the checkpoint: ``show`` exited 0 with another leader); plain
``verify`` now says what it checked and what only ``--replay`` checks."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from study.online import Ranker, StoreError, verify_store
from study.online import __main__ as online_main
from study.online.audit import summary_text
from study.online.store import pack

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import online_child  # noqa: E402  (tests/support)


def told(path, n=12):
    env = online_child.environment()
    with online_child.create(path) as ranker:
        for k in range(n):
            ticket = ranker.ask(env.contexts[k])
            ranker.tell(ticket, online_child.judge(env, ticket), 20)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return told(tmp_path_factory.mktemp("reads") / "store.sqlite")


def copy(store, tmp_path, edit, name):
    path = tmp_path / name
    path.write_bytes(Path(store).read_bytes())
    conn = sqlite3.connect(path, isolation_level=None)
    edit(conn)
    conn.close()
    return path


def leader_swapped(conn):
    """The estimate row with two items' rows swapped: another leader."""
    blob, = conn.execute("SELECT theta FROM estimate").fetchone()
    theta = np.frombuffer(blob, dtype="<f8").reshape(5, -1).copy()
    theta[[0, 4]] = theta[[4, 0]]
    conn.execute("UPDATE estimate SET theta = ?", (pack(theta),))


def theta_bit_flipped_in_checkpoint(conn):
    """One bit of theta flipped inside the checkpoint (found by the estimate's bytes in it)."""
    theta, = conn.execute("SELECT theta FROM estimate").fetchone()
    state, = conn.execute("SELECT state FROM checkpoint").fetchone()
    at = state.find(theta)
    assert at > 0
    flipped = bytearray(state)
    flipped[at + 7] ^= 0x01  # the top byte of theta[0, 0]: sign flip
    conn.execute("UPDATE checkpoint SET state = ?", (bytes(flipped),))


@pytest.mark.parametrize("edit", [leader_swapped, theta_bit_flipped_in_checkpoint])
def test_show_and_read_only_opens_refuse_what_a_writable_open_refuses(store, tmp_path, edit, capsys):
    path = copy(store, tmp_path, edit, f"{edit.__name__}.sqlite")
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(StoreError, match="refused, checkpoint row: its estimate differs from the estimate row"):
            Ranker(path, readonly=readonly)
    with pytest.raises(StoreError, match="its estimate differs"):
        verify_store(path)
    assert online_main.main(["show", str(path), "--no-png"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused, checkpoint row" in err and "Traceback" not in err
    assert path.read_bytes() == before


def test_a_reader_follows_other_processes_tells_and_checks_them(store, tmp_path):
    path = copy(store, tmp_path, lambda conn: None, "followed.sqlite")
    reader = Ranker(path, readonly=True)
    assert reader.n_told == 12
    env = online_child.environment()
    with Ranker(path) as writer:
        ticket = writer.ask(env.contexts[12])
        writer.tell(ticket, online_child.judge(env, ticket), 20)
        theta = writer.theta
    assert reader.n_told == 13 and np.array_equal(reader.theta, theta)
    conn = sqlite3.connect(path, isolation_level=None)  # a later hand edit of the estimate of a new tell
    with Ranker(path) as writer:
        ticket = writer.ask(env.contexts[13])
        writer.tell(ticket, online_child.judge(env, ticket), 20)
    leader_swapped(conn)
    conn.close()
    with pytest.raises(StoreError, match="its estimate differs from the estimate row"):
        reader.n_told
    reader.close()


def test_an_estimate_altered_after_an_older_checkpoint_is_not_shown(tmp_path, monkeypatch):
    """Checkpoints every few tells (a large state, made so by a small CHECKPOINT_BYTES): the tells
    after the checkpoint are refitted on every read, as on a writable open: the altered estimate is
    warned about and not used; verify refuses it, and says what only --replay checks."""
    monkeypatch.setattr("study.online.store.CHECKPOINT_BYTES", 2000)
    path = told(tmp_path / "strided.sqlite", n=14)
    conn = sqlite3.connect(path)
    seq, = conn.execute("SELECT seq FROM checkpoint").fetchone()
    conn.close()
    assert seq < 14  # the checkpoint is older than the last tell
    with Ranker(path, readonly=True) as reader:
        honest = reader.theta
    altered = copy(path, tmp_path, leader_swapped, "altered.sqlite")
    with pytest.warns(RuntimeWarning, match="gave an estimate .* away from the stored one"):
        reader = Ranker(altered, readonly=True)
    assert np.array_equal(reader.theta, honest)
    reader.close()
    with pytest.raises(StoreError, match=f"estimate row: not the estimate the {14 - seq} tells after the checkpoint"):
        verify_store(altered)
    summary = verify_store(path)
    assert summary["tail_refitted"] == 14 - seq
    text = summary_text(summary)
    assert f"the {14 - seq} tells after it refitted" in text
    assert f"not verified without --replay: that the told outcomes before the checkpoint ({seq} of 14)" in text


def test_verify_of_a_small_store_says_what_only_replay_checks(store):
    text = summary_text(verify_store(store))
    assert "not verified without --replay" in text and "(12 of 12)" in text
    replayed = summary_text(verify_store(store, replay=True))
    assert "whole history refitted" in replayed and "not verified" not in replayed
