"""A dirty log in one run (study.leaderboard.names, checks.check_names): every problem of the names
-- case and space variants, a misspelt-looking name, a model compared with itself -- named in one
line; ``--normalise-names`` merges case and space variants, ``--aliases FILE`` maps any name, and the
cleaned log gives the clean log's board."""
import json

import numpy as np
import pandas as pd
import pytest

from study.leaderboard import leaderboard
from study.leaderboard.__main__ import main
from study.leaderboard.names import read_aliases
from test_leaderboard_formats import battles, write


def dirty():
    frame = battles(rows=800, seed=8)
    clean = frame.copy()
    rng = np.random.default_rng(8)
    beta = frame.model_a == "beta"
    frame.loc[beta & (rng.random(len(frame)) < 0.3), "model_a"] = "BETA"       # a case variant
    frame.loc[frame.model_b == "gamma", "model_b"] = np.where(rng.random((frame.model_b == "gamma").sum()) < 0.2,
                                                              " gamma ", "gamma")  # spaces
    frame.loc[3, "model_a"], frame.loc[3, "model_b"] = "delta", "alpah"             # a misspelt name (1 judgment)
    frame.loc[5, "model_b"] = frame.loc[5, "model_a"]                             # a model against itself
    clean.loc[3, "model_a"], clean.loc[3, "model_b"] = "delta", "alpha"
    clean = clean.drop(index=5)
    return frame, clean


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_problem_of_a_dirty_log_in_one_line(tmp_path, capsys):
    frame, _ = dirty()
    path = write(frame, tmp_path / "votes.csv")
    code, out, err = run(capsys, path, "--out", tmp_path / "o")
    assert code == 2 and out == "" and err.count("\n") == 1 and not (tmp_path / "o").exists()
    assert "4 problems with the names" in err
    assert "row 6 (file line 7), column 'model_b': the same model as model_a" in err
    assert "`BETA` and `beta` differ only in case" in err and "` gamma ` and `gamma` differ only in case" in err
    assert "`alpah`: 1 judgment; did you mean `alpha`?" in err
    assert "--aliases FILE" in err and "--normalise-names" in err


def test_normalise_merges_case_and_spaces_only(tmp_path, capsys):
    frame, _ = dirty()
    path = write(frame, tmp_path / "votes.csv")
    code, out, err = run(capsys, path, "--out", tmp_path / "o", "--normalise-names")
    assert code == 2 and "2 problems with the names" in err and "differ only in case" not in err
    assert "the same model as model_a" in err and "`alpah`: 1 judgment" in err


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_aliases_and_normalisation_give_the_clean_logs_board(tmp_path, capsys, suffix):
    frame, clean = dirty()
    path = write(frame.drop(index=5), tmp_path / "votes.csv")  # the self-pair is a row to fix, not a name
    aliases = tmp_path / f"aliases{suffix}"
    if suffix == ".csv":
        aliases.write_text("alias,name\nalpah,alpha\nNA,n/a\n")
    else:
        aliases.write_text(json.dumps({"alpah": "alpha"}))
    code, out, err = run(capsys, path, "--out", tmp_path / "o", "--aliases", aliases, "--normalise-names",
                         "--no-figures")
    assert code == 0, err
    assert "1 name mapped by the aliases file" in out and "merged (--normalise-names)" in out
    board = pd.read_csv(tmp_path / "o" / "leaderboard.csv").set_index("model")
    expected = leaderboard(clean).table().set_index("model")
    assert sorted(board.index) == sorted(expected.index) == ["alpha", "beta", "delta", "gamma"]
    np.testing.assert_allclose(board.score.loc[expected.index], expected.score, atol=1e-9)
    np.testing.assert_array_equal(board.judgments.loc[expected.index], expected.judgments)


def test_the_majority_spelling_is_kept():
    frame = battles(rows=400, seed=9)
    frame.loc[frame.index[:30][frame.model_a.iloc[:30] == "beta"], "model_a"] = "Beta"
    names = leaderboard(frame, normalise_names=True).models
    assert "beta" in names and "Beta" not in names


def test_bad_alias_files_are_refused_in_one_line(tmp_path):
    cases = {"chain.csv": ("a,b\nb,c\n", "`a` maps to `b`, which maps to `c`"),
             "twice.csv": ("a,b\na,c\n", "`a` is mapped to both `b` and `c`"),
             "three.csv": ("a,b,c\n", "line 1: expected two columns"),
             "list.json": ("[1, 2]", "expected a JSON object"),
             "deep.json": ("[" * 100_000 + "]" * 100_000, "not JSON")}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ValueError, match=message) as info:
            read_aliases(path)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no such aliases file"):
        read_aliases(tmp_path / "absent.csv")
    assert read_aliases(_write(tmp_path / "na.csv", "NA,null\nnan,None\n")) == {"NA": "null", "nan": "None"}


def _write(path, text):
    path.write_text(text)
    return path
