"""Hostile files, each refused or handled in one line (study.leaderboard.files, .output, .board):
formula-like names neutralised in the CSV, the number of models and the file's size checked before
memory is spent, a JSON array nested 100,000 deep, NA-like names in a CSV read as names, output
written whole or not at all.  (Time and memory of these cases: benchmarks/leaderboard.py.)"""
import csv
import errno
import json

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard, read_battles
from study.leaderboard import output
from study.leaderboard.__main__ import main
from study.leaderboard.board import MAX_MODELS
from study.leaderboard.files import MAX_FILE_BYTES, MAX_JSON_ARRAY_BYTES
from test_leaderboard_formats import battles, write


def refused(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1, captured.err
    return captured.err


def test_formula_like_names_are_neutralised_in_the_csv(tmp_path, capsys):
    frame = battles(rows=600, seed=10)
    hostile = {"alpha": '=HYPERLINK("http://example.invalid","x")', "beta": "=1+1", "gamma": "@SUM(A1)",
               "delta": "-cmd"}
    frame = frame.replace({"model_a": hostile, "model_b": hostile})
    path = write(frame, tmp_path / "votes.parquet")
    assert main([str(path), "--out", str(tmp_path / "o"), "--no-figures", "--quiet"]) == 0
    with open(tmp_path / "o" / "leaderboard.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(r["model"] for r in rows) == sorted("'" + name for name in hostile.values())
    assert any(float(r["score"]) < 0 for r in rows)  # numbers are not touched
    assert all(not r["model"].startswith(("=", "+", "-", "@")) for r in rows)
    records = json.loads((tmp_path / "o" / "leaderboard.json").read_text())["models"]
    assert sorted(r["model"] for r in records) == sorted(hostile.values())  # JSON keeps the names as they are


def test_too_many_models_are_refused_before_any_allocation(tmp_path, capsys):
    n = 100_000
    names = [f"m{k}" for k in range(n)]
    frame = pd.DataFrame({"model_a": names, "model_b": names[1:] + names[:1], "winner": ["model_a", "model_b"] * (n // 2)})
    path = write(frame, tmp_path / "ring.csv")
    err = refused(capsys, path, "--out", tmp_path / "o", "--min-judgments", "1")
    assert f"100,000 models; a board holds at most {MAX_MODELS:,} models" in err


def test_files_above_the_size_caps_are_refused_before_reading(tmp_path, capsys):
    big = tmp_path / "big.csv"
    with open(big, "wb") as handle:  # sparse: no disk used
        handle.truncate(MAX_FILE_BYTES + 1)
    assert "files above 512 MiB are refused before reading" in refused(capsys, big, "--out", tmp_path / "o")
    array = tmp_path / "array.json"
    with open(array, "wb") as handle:
        handle.write(b"[")
        handle.truncate(MAX_JSON_ARRAY_BYTES + 1)
    err = refused(capsys, array, "--out", tmp_path / "o")
    assert "a JSON array of 32 MiB; arrays above 32 MiB are refused before parsing" in err


def test_a_json_array_nested_deep_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "deep.json: cannot read it as JSON: nested too deep" in refused(capsys, path, "--out", tmp_path / "o")


def test_na_like_model_names_in_a_csv_are_names(tmp_path):
    frame = battles(rows=600, seed=11)
    names = {"alpha": "NA", "beta": "null", "gamma": "nan", "delta": "None"}
    frame = frame.replace({"model_a": names, "model_b": names})
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False, na_rep="")
    board = leaderboard(path)
    assert sorted(board.models) == sorted(names.values())
    reference = leaderboard(battles(rows=600, seed=11)).table().set_index("model").score
    np.testing.assert_allclose(board.table().set_index("model").score.loc[[names[m] for m in reference.index]],
                               reference, atol=1e-10)
    frame.loc[4, "model_b"] = ""  # an empty cell is still missing
    frame.to_csv(path, index=False, na_rep="")
    with pytest.raises(ValueError, match="row 5 .*column 'model_b': empty value"):
        read_battles(path)


@pytest.mark.parametrize("existing", [False, True])
def test_output_is_written_whole_or_not_at_all(tmp_path, capsys, monkeypatch, existing):
    path = write(battles(rows=600, seed=12), tmp_path / "votes.csv")
    out = tmp_path / "board"
    if existing:
        out.mkdir()
        (out / "leaderboard.md").write_text("the previous board")
    calls = []
    real = output._write_one

    def full_disk(target, data):
        calls.append(target.name)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(target, data)

    monkeypatch.setattr(output, "_write_one", full_disk)
    err = refused(capsys, path, "--out", out)
    assert "cannot write to" in err and "No space left on device" in err
    if existing:
        assert sorted(p.name for p in out.iterdir()) == ["leaderboard.md"]
        assert (out / "leaderboard.md").read_text() == "the previous board"
    else:
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["votes.csv"] + (["board"] if existing else []))
    monkeypatch.setattr(output, "_write_one", real)
    assert main([str(path), "--out", str(out), "--quiet"]) == 0
    assert (out / "leaderboard.md").read_text().startswith("Leaderboard of")
