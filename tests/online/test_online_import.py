"""Earlier judgments as evidence (study.online.importing, ``python -m study.online import``): a
battle log imported into a store becomes told rows of the likelihood -- the export of a store,
imported into a new one of the same arguments, gives its estimate bit for bit and the same
judge-clustered intervals -- and bad files are refused before anything is written."""
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.online import Ranker, judges, verify_store
from study.online.export import battle_rows, export_battles
from study.online.importing import import_judgments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_online_judges import judged_store  # noqa: E402

ITEMS = ["m-a", "m-b", "m-c", "m-d"]


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_an_imported_export_is_the_same_evidence(tmp_path):
    source = tmp_path / "source.sqlite"
    judged_store(source, tells=300)
    log = export_battles(source, tmp_path / "battles.parquet")
    target = tmp_path / "target.sqlite"
    with Ranker(target, items=ITEMS, dim=1, T=5000, T0=200, seed=9) as ranker:  # another seed: the same fit
        assert import_judgments(ranker, log) == 300
        with Ranker(source, readonly=True) as original:
            np.testing.assert_array_equal(ranker.theta, original.theta)  # the same rows, in the same order
            pd.testing.assert_frame_equal(ranker.ranking(), original.ranking())  # clustered by the same judges
        assert {row["name"] for row in judges.listing(ranker)} == {"alice", "bob", "carol", "dan"}
        assert all(row["revoked"] is not None for row in judges.listing(ranker))  # no usable token
        frame = battle_rows(ranker)
        assert (frame.question_id == np.arange(1, 301)).all() and frame.side.isna().all()
        ticket = ranker.ask([1.0])  # and it goes on
        assert ticket.id == 301 and ticket.told_before == 300
        ranker.tell(ticket, 1)
    verify_store(target, replay=True)


def test_rows_of_more_than_M_comparisons_are_told_in_asks_of_at_most_M(tmp_path):
    counts = pd.DataFrame({"model_a": ["m-a", "m-c"], "model_b": ["m-b", "m-d"], "wins_a": [4, 1], "wins_b": [2, 0],
                           "ties": [1, 3]})
    with Ranker(tmp_path / "r.sqlite", items=ITEMS, dim=1, T=100, M=3, seed=1) as ranker:
        assert import_judgments(ranker, counts) == 5  # 7 comparisons: 3 + 3 + 1; 4: 3 + 1
        told = ranker.counts()
        assert told["comparisons"] == 11 and told["ties"] == 4
        ledger = ranker._opened.ledger
        assert list(ledger.m[:5]) == [3, 3, 1, 3, 1] and ledger.wins[:5].sum() == 2


def test_bad_files_are_refused_and_change_nothing(tmp_path):
    path = tmp_path / "r.sqlite"
    with Ranker(path, items=ITEMS, dim=1, T=10, seed=1) as ranker:
        ranker.tell(ranker.ask([1.0]), 1)
    before = sha(path)
    cases = [
        (pd.DataFrame({"model_a": ["m-a"], "model_b": ["m-x"], "winner": ["model_a"]}), "'m-x' is not an item"),
        (pd.DataFrame({"model_a": ["m-a"] * 10, "model_b": ["m-b"] * 10, "winner": ["tie"] * 10}), "exceed the 9"),
        (pd.DataFrame({"model_a": ["m-a"], "model_b": ["m-b"], "winner": ["model_a"], "context": [[1.0, 2.0]]}),
         "dimension 2"),
        (pd.DataFrame({"model_a": ["m-a"], "model_b": ["m-b"], "winner": ["model_a"], "judge": ["#x"]}), None),
    ]
    with Ranker(path) as ranker:
        for frame, message in cases[:3]:
            with pytest.raises(ValueError, match=message):
                import_judgments(ranker, frame)
    assert sha(path) == before
    log = tmp_path / "one.csv"
    cases[3][0].to_csv(log, index=False)
    done = subprocess.run([sys.executable, "-m", "study.online", "import", str(path), str(log)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "imported 1 told rows" in done.stdout
    with Ranker(path, readonly=True) as ranker:
        assert ranker.n_told == 2 and judges.listing(ranker) == []  # '#x': no judge
    missing = subprocess.run([sys.executable, "-m", "study.online", "import", str(path), str(tmp_path / "none.csv")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such file" in missing.stderr
