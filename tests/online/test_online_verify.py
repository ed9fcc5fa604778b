"""A store is verified before it is trusted: every crafted or damaged store below (issue 25's list
and more) is refused on opening -- read-only or writable, by the API (StoreError, a ValueError)
and by ``python -m study.online show`` (exit 2) and ``verify`` (exit 1) -- with one line naming the
file and the first offending row, and the file is left byte for byte as it was."""
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from study.online import Ranker, StoreError, verify_store
from study.online.verify import Ledger

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import online_child  # noqa: E402  (tests/support)


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """A valid store: Setting A, 12 tells, ticket 13 expired, ticket 14 open."""
    path = tmp_path_factory.mktemp("valid") / "valid.sqlite"
    env = online_child.environment()
    with online_child.create(path) as ranker:
        for k in range(12):
            ticket = ranker.ask(env.contexts[k])
            ranker.tell(ticket, online_child.judge(env, ticket), 20)
        ranker.expire(ranker.ask(env.contexts[12]))
        ranker.ask(env.contexts[13])
    return path


fingerprint, dump = online_child.sha256, online_child.dump


def crafted(valid, tmp_path, *statements, name="crafted.sqlite"):
    """A copy of the valid store changed by raw SQL (CHECK constraints off, as a hand edit may have them)."""
    path = tmp_path / name
    path.write_bytes(Path(valid).read_bytes())
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    for statement in statements:
        if callable(statement):
            statement(conn)
        else:
            conn.execute(statement)
    conn.close()
    return path


def _blob(values):
    return np.asarray(values, dtype="<f8").tobytes()


def _arguments(change):
    def edit(conn):
        args = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'arguments'").fetchone()[0])
        change(args)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'arguments'", (json.dumps(args),))
    return edit


def _drop_unique(conn):  # tells without its UNIQUE(ask_id): a duplicated tell row becomes possible
    conn.execute("CREATE TABLE t2 AS SELECT * FROM tells")
    conn.execute("DROP TABLE tells")
    conn.execute("CREATE TABLE tells (seq INTEGER PRIMARY KEY, ask_id INTEGER NOT NULL, wins INTEGER NOT NULL, "
                 "ties INTEGER NOT NULL, m INTEGER NOT NULL, told_at REAL NOT NULL)")
    conn.execute("INSERT INTO tells SELECT * FROM t2")
    conn.execute("DROP TABLE t2")
    conn.execute("INSERT INTO tells SELECT 13, ask_id, wins, ties, m, told_at FROM tells WHERE seq = 5")
    conn.execute("UPDATE estimate SET seq = 13")


CASES = {  # name: (statements, the expected "where" of the message, part of the "what")
    "trigger flipping wins": (["CREATE TRIGGER flip AFTER INSERT ON tells BEGIN UPDATE tells SET wins = m - wins - ties "
                               "WHERE seq = new.seq; END"], "trigger 'flip' on tells", "not part of"),
    "extra view": (["CREATE VIEW v AS SELECT * FROM asks"], "view 'v'", "not part of"),
    "extra table": (["CREATE TABLE notes (x)"], "table 'notes'", "not part of"),
    "extra index": (["CREATE INDEX tells_m ON tells(m)"], "index 'tells_m' on tells", "not part of"),
    "tells replaced by a view": (["ALTER TABLE tells RENAME TO old", "CREATE VIEW tells AS SELECT * FROM old"],
                                 "table 'old'", "not part of"),
    "column type changed": (["ALTER TABLE asks RENAME COLUMN major TO major_"], "table 'asks'", "declared otherwise"),
    "duplicated tell row": ([_drop_unique], "table 'tells'", "declared otherwise"),
    "checkpoint table missing": (["DROP TABLE checkpoint"], "table 'checkpoint'", "missing"),
    "unknown format": (["UPDATE meta SET value = 'study.online/9' WHERE key = 'format'"], "format", "reads"),
    "unknown meta key": (["INSERT INTO meta VALUES ('zzz', 'x')"], "meta key 'zzz'", "not a key"),
    "missing meta key": (["DELETE FROM meta WHERE key = 'created'"], "meta key 'created'", "missing"),
    "store id not hex": (["UPDATE meta SET value = 'abc' WHERE key = 'store_id'"], "meta key 'store_id'", "hexadecimal"),
    "short items list": ([_arguments(lambda a: a.update(items=["a", "b", "c"]))], "meta key 'arguments'",
                         "items has 3 names but n_items = 5"),
    "arguments missing a key": ([_arguments(lambda a: a.pop("gamma"))], "meta key 'arguments'", "lack gamma"),
    "theta0 of 1e150": ([_arguments(lambda a: a["theta0"][0].__setitem__(0, 1e150))], "meta key 'arguments'",
                        "theta0 has entries as large as 1e+150"),
    "REAL wins": (["UPDATE tells SET wins = 1.5 WHERE seq = 4"], "tells row 4", "wins is not an INTEGER"),
    "wins > m": (["UPDATE tells SET wins = 25 WHERE seq = 6"], "tells row 6", "wins + ties = 25 + 0 exceeds m = 20"),
    "m < 0": (["UPDATE tells SET m = -1, wins = 0 WHERE seq = 3"], "tells row 3", "m = -1 is less than 1"),
    "m > M": (["UPDATE tells SET m = 21 WHERE seq = 2"], "tells row 2", "m = 21 exceeds M = 20"),
    "major = -1": (["UPDATE asks SET major = -1 WHERE id = 7"], "asks row 7", "major = -1 is not an item"),
    "other out of range": (["UPDATE asks SET other = 5 WHERE id = 9"], "asks row 9", "other = 5 is not an item"),
    "major == other": (["UPDATE asks SET other = major WHERE id = 8"], "asks row 8", "compared with itself"),
    "not an edge": (["UPDATE asks SET major = 0, other = 2 WHERE id = 3"], "asks row 3", "not an edge"),
    "short x blob": (["UPDATE asks SET x = substr(x, 1, 16) WHERE id = 5"], "asks row 5", "x has 16 bytes"),
    "NaN context": ([lambda c: c.execute("UPDATE asks SET x = ? WHERE id = 2", (_blob([np.nan] * 10),))],
                    "asks row 2", "x holds NaN or inf"),
    "huge context": ([lambda c: c.execute("UPDATE asks SET x = ? WHERE id = 2", (_blob([1e200] * 10),))],
                     "asks row 2", "beyond"),
    "ask ids with a gap": (["UPDATE asks SET id = 20 WHERE id = 14"], "asks row 20", "jump from 13 to 20"),
    "ask beyond the horizon": (["WITH RECURSIVE k(i) AS (SELECT 15 UNION ALL SELECT i + 1 FROM k WHERE i < 61) "
                                "INSERT INTO asks SELECT k.i, x, major, other, explored, told_before, rng_state, "
                                "'expired', asked_at, asked_at FROM k, asks WHERE asks.id = 14"], "asks row 61",
                               "beyond the horizon T = 60"),
    "explored = 2": (["UPDATE asks SET explored = 2 WHERE id = 4"], "asks row 4", "explored = 2"),
    "told_before decreasing": (["UPDATE asks SET told_before = 0 WHERE id = 6"], "asks row 6",
                               "less than the previous ask's"),
    "told without a tell": (["UPDATE asks SET status = 'told', closed_at = asked_at WHERE id = 14"], "asks row 14",
                            "no tell names ticket 14"),
    "open with closed_at": (["UPDATE asks SET closed_at = 1.0 WHERE id = 14"], "asks row 14", "closed_at"),
    "tell of an open ticket": (["UPDATE asks SET status = 'open', closed_at = NULL WHERE id = 10"], "tells row 10",
                               "not marked told"),
    "tell of no ticket": (["UPDATE tells SET ask_id = 99 WHERE seq = 12"], "tells row 12", "names no ticket"),
    "seq with a gap": (["UPDATE tells SET seq = 15 WHERE seq = 12", "UPDATE estimate SET seq = 15"], "tells row 15",
                       "jumps from 11 to 15"),
    "tell before its ask's estimate": (["UPDATE asks SET told_before = 11 WHERE id BETWEEN 11 AND 12"], "tells row 11",
                                       "was asked when 11 outcomes were told"),
    "estimate behind": (["UPDATE estimate SET seq = 11"], "estimate row", "seq = 11, but 12 outcomes are told"),
    "estimate short": (["UPDATE estimate SET theta = substr(theta, 1, 80)"], "estimate row", "not 5 x 10"),
    "estimate missing": (["DELETE FROM estimate"], "estimate", "missing"),
    "checkpoint too old": (["UPDATE checkpoint SET seq = 2"], "checkpoint row", "older than"),
    "checkpoint not one": (["UPDATE checkpoint SET state = x'0001'"], "checkpoint row", "bad magic"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_store_is_refused_naming_the_file_and_the_row(valid, tmp_path, case):
    statements, where, what = CASES[case]
    path = crafted(valid, tmp_path, *statements)
    before, rows = fingerprint(path), dump(path)
    for refused_open in (lambda: Ranker(path, readonly=True), lambda: Ranker(path), lambda: verify_store(path)):
        with pytest.raises(StoreError) as refused:
            refused_open()
        message = str(refused.value)
        assert message.startswith(f"{path}: ") and where in message and what in message, message
        assert "\n" not in message
    assert fingerprint(path) == before  # not a byte changed
    assert dump(path) == rows


@pytest.mark.parametrize("case", ["trigger flipping wins", "REAL wins", "major = -1", "NaN context"])
def test_show_and_verify_refuse_a_crafted_store_in_one_line(valid, tmp_path, case):
    statements, where, what = CASES[case]
    path = crafted(valid, tmp_path, *statements)
    before = fingerprint(path)
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(path), "--no-png"], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 2 and where in shown.stderr and str(path) in shown.stderr, shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1 and not shown.stdout
    checked = subprocess.run([sys.executable, "-m", "study.online", "verify", str(path)], capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 1 and where in checked.stderr and what in checked.stderr, checked.stderr
    assert len(checked.stderr.strip().splitlines()) == 1
    assert fingerprint(path) == before


def test_the_valid_store_passes_and_the_trigger_would_have_flipped_the_outcome(valid, tmp_path):
    """The control: the untouched copy opens and verifies (also with --replay); with the trigger of
    issue 25 installed, a tell of wins=1 would be stored flipped -- which is why it is refused."""
    path = crafted(valid, tmp_path)
    checked = subprocess.run([sys.executable, "-m", "study.online", "verify", str(path), "--replay"],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    assert "asked 14: told 12, open 1, expired 1" in checked.stdout and "bit for bit" in checked.stdout
    with Ranker(path) as ranker:
        ticket = ranker.pending()[0]
    flipped = crafted(valid, tmp_path, CASES["trigger flipping wins"][0][0], name="flipped.sqlite")
    conn = sqlite3.connect(flipped)
    conn.execute("INSERT INTO tells VALUES (13, 14, 1, 0, 20, 0.0)")
    assert conn.execute("SELECT wins FROM tells WHERE seq = 13").fetchone()[0] == 19
    conn.rollback()
    assert ticket.id == 14


def test_the_row_checks_catch_a_duplicated_tell_where_no_index_forbids_it(valid, tmp_path):
    """The row invariants hold on their own (defence in depth behind the schema): a tell row
    repeated in a store whose tells table has no UNIQUE index is named."""
    path = crafted(valid, tmp_path, _drop_unique)
    opened = Ranker(valid, readonly=True)
    ledger = Ledger(path, opened.config)
    opened.close()
    conn = sqlite3.connect(path)
    ledger.read_asks(conn)
    with pytest.raises(StoreError, match=r"tells row 13: ticket \d+ is told a second time \(first as seq 5\)"):
        ledger.read_tells(conn)


def test_a_checkpoint_that_decodes_but_lies_is_refused_where_it_would_be_used(valid, tmp_path):
    """A crafted checkpoint with this code's fingerprint: the writable open (which would restore
    it), read-only opens (which restore it as the writable open does, issue 35) and verify refuse
    it.  ``verify --replay`` would prove any other difference (test_the_valid_store_passes...)."""
    from study.online import snapshot

    with Ranker(valid, readonly=True) as reader:
        estimate = reader._read().estimate
    theta = estimate.theta
    for k, (change, message) in enumerate([(lambda e: setattr(e, "multipliers", np.array([-1.0])), "its ball multipliers"),
                            (lambda e: setattr(e, "identified", "yes"), "its identified is a str"),
                            (lambda e: setattr(e, "theta", theta + 1.0), "its estimate differs from the estimate row")]):
        change(estimate)
        blob = snapshot.capture(estimate)
        estimate.theta, estimate.multipliers, estimate.identified = theta, None, False
        path = crafted(valid, tmp_path, lambda c, b=blob: c.execute("UPDATE checkpoint SET state = ?", (b,)),
                       name=f"lies{k}.sqlite")
        before = fingerprint(path)
        with pytest.raises(StoreError, match=f"checkpoint row: {message}"):
            Ranker(path)
        with pytest.raises(StoreError, match=f"checkpoint row: {message}"):
            verify_store(path)
        with pytest.raises(StoreError, match=f"checkpoint row: {message}"):
            Ranker(path, readonly=True)
        assert fingerprint(path) == before



def test_a_checkpoint_restores_onto_an_estimate_whose_kept_factor_is_of_another_kind(valid):
    """Two writers' refits take different paths: one keeps a dense factor that became its explicit
    inverse at a new row, the other a freshly factorised one.  The restore of either's checkpoint
    onto the other's estimate is not a forged type (CI saw a second writer refused for it); another
    kind of object in the factor's place still is."""
    from study.core.systems import DenseInverse, Factor, factorize
    from study.online import snapshot

    with Ranker(valid, readonly=True) as reader:
        estimate = reader._read().estimate
    assert isinstance(estimate.factor, DenseInverse)  # what 12 refits leave: otherwise the test shows nothing
    theta, blob = estimate.theta.copy(), snapshot.capture(estimate)
    estimate.factor = factorize(estimate.data, estimate.data.margins(theta), np.full(estimate.data.n_items, 1e-4))
    assert isinstance(estimate.factor, Factor)
    snapshot.restore(estimate, blob)
    assert isinstance(estimate.factor, DenseInverse) and np.array_equal(estimate.theta, theta)
    estimate.factor = np.eye(2)  # not a kept factor: refused
    with pytest.raises(snapshot.SnapshotError, match="its factor is a DenseInverse, not a ndarray"):
        snapshot.restore(estimate, blob)
