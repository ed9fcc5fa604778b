"""``python -m study.leaderboard``: the table and figures from a file, and bad input refused before
anything is written -- exit status 2, one line naming the file, row, column or models, no file.

Each bad input of the issue is a case: a misspelt model (with and without a ridge), names equal up to
case, a disconnected graph (its components named), separable data (the models that never lose and
never win named; per category too), NaN and infinite contexts, an unknown winner value, empty files,
an empty name, a missing column."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from study.leaderboard.__main__ import main
from test_leaderboard_formats import battles, write


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(capsys, tmp_path, frame_or_path, *options, suffix=".csv"):
    path = frame_or_path if not isinstance(frame_or_path, pd.DataFrame) else write(frame_or_path,
                                                                                    tmp_path / f"in{suffix}")
    out = tmp_path / "out"
    code, stdout, stderr = run(capsys, path, "--out", out, *options)
    assert code == 2 and stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("study.leaderboard: error: "), stderr
    assert not out.exists()  # nothing written
    return lines[0]


def test_the_command_writes_the_table_and_figures(tmp_path, capsys):
    path = write(battles(rows=600, seed=1), tmp_path / "votes.parquet")
    code, stdout, stderr = run(capsys, path, "--out", tmp_path / "board", "--category", "category")
    assert code == 0, stderr
    written = sorted(p.name for p in (tmp_path / "board").iterdir())
    assert written == ["arena.json", "arena.md", "battle_counts.png", "diagram.png", "leaderboard.csv",
                       "leaderboard.json", "leaderboard.md", "ranks.png", "scores.png", "win_probabilities.png",
                       "win_rates.png"]
    assert "| rank | rank interval | model |" in stdout and "judge-clustered" in stdout
    table = pd.read_csv(tmp_path / "board" / "leaderboard.csv")
    assert list(table.columns) == ["rank", "model", "score", "lower", "upper", "se", "rank_lower", "rank_upper",
                                   "rank_ub", "judgments", "wins", "ties", "win_rate", "preliminary"]
    meta = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert meta["leaderboard"]["tie_rule"] == "half" and len(meta["models"]) == 4
    for png in ("scores.png", "win_rates.png", "diagram.png", "win_probabilities.png", "battle_counts.png", "ranks.png"):
        assert (tmp_path / "board" / png).read_bytes()[:4] == b"\x89PNG"


def test_by_writes_the_figures_of_every_board_in_its_folder(tmp_path, capsys):
    path = write(battles(rows=600, seed=1), tmp_path / "votes.parquet")
    out = tmp_path / "by"
    code, stdout, stderr = run(capsys, path, "--out", out, "--by", "category")
    assert code == 0, stderr
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    board = ["arena.md", "battle_counts.png", "leaderboard.csv", "leaderboard.json", "leaderboard.md", "ranks.png",
             "scores.png", "win_probabilities.png", "win_rates.png"]  # plain boards: no diagram.png
    assert written == sorted(["arena.json", "overview.md", *board, *(f"{c}/{name}" for c in ("code", "math")
                                                                     for name in board)])
    for png in (name for name in written if name.endswith(".png")):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_options_scale_anchor_context_and_formats(tmp_path, capsys):
    path = write(battles(rows=600, seed=2), tmp_path / "votes.jsonl")
    code, stdout, stderr = run(capsys, path, "--out", tmp_path / "b", "--scale", "elo", "--anchor", "delta=1100",
                               "--category", "category", "--at", "math", "--formats", "md,json", "--no-figures",
                               "--se", "sandwich", "--tie-rule", "drop-bothbad")
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["leaderboard.json", "leaderboard.md"]
    models = json.loads((tmp_path / "b" / "leaderboard.json").read_text())["models"]
    assert {m["model"]: m["score"] for m in models}["delta"] == pytest.approx(1100.0)
    assert "[category=math]" in stdout and "Elo-style" in stdout and "'drop-bothbad'" in stdout


def test_python_dash_m_runs_and_exits_2_on_bad_input(tmp_path):
    path = write(battles(rows=300), tmp_path / "votes.csv")
    ok = subprocess.run([sys.executable, "-m", "study.leaderboard", str(path), "--out", str(tmp_path / "o"),
                         "--quiet"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == "", ok.stderr
    bad = subprocess.run([sys.executable, "-m", "study.leaderboard", str(tmp_path / "absent.csv"), "--out",
                          str(tmp_path / "p")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("absent.csv: no such file")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("ridge", [[], ["--ridge", "1"]])
def test_a_misspelt_model_is_named_with_its_likely_name(tmp_path, capsys, ridge):
    frame = pd.concat([battles(), pd.DataFrame([{"model_a": "gamme", "model_b": "beta", "winner": "model_b",
                                                 "judge": "x", "category": "code", "length": 0.0}])])
    line = refused(capsys, tmp_path, frame, *ridge)
    assert "`gamme`: 1 judgment; did you mean `gamma`?" in line and "--min-judgments" in line


def test_few_judgments_without_a_near_name(tmp_path, capsys):
    frame = pd.concat([battles(), pd.DataFrame([{"model_a": "zzz-9000", "model_b": "beta", "winner": winner,
                                                 "judge": judge, "category": "code", "length": 0.0}
                                                for winner, judge in (("model_a", "x"), ("model_b", "y"),
                                                                      ("tie", "x"))])])
    line = refused(capsys, tmp_path, frame)
    assert "`zzz-9000`: 3 judgments -- fewer than 10 judgments" in line and "did you mean" not in line
    code, _, _ = run(capsys, write(frame, tmp_path / "again.csv"), "--out", tmp_path / "ok", "--min-judgments", "3",
                     "--quiet")
    assert code == 0


def test_a_model_judged_by_one_judge_is_refused_for_clustered_errors(tmp_path, capsys):
    frame = pd.concat([battles(), pd.DataFrame([{"model_a": "zzz-9000", "model_b": "beta", "winner": winner,
                                                 "judge": "x", "category": "code", "length": 0.0}
                                                for winner in ("model_a", "model_b", "tie") * 4])])
    line = refused(capsys, tmp_path, frame)
    assert "`zzz-9000`: every judgment of it is by one judge (`x`)" in line and "--se sandwich" in line
    code, _, _ = run(capsys, write(frame, tmp_path / "s.csv"), "--out", tmp_path / "ok", "--se", "sandwich", "--quiet")
    assert code == 0


def test_names_equal_up_to_case_and_spaces(tmp_path, capsys):
    frame = battles()
    frame.loc[frame.model_a == "beta", "model_a"] = "Beta "
    line = refused(capsys, tmp_path, frame, suffix=".parquet")
    assert "`Beta ` and `beta` differ only in case, spaces or punctuation" in line


def test_a_disconnected_graph_names_its_components(tmp_path, capsys):
    left = battles(rows=200, seed=3)
    left = left[left.model_a.isin(["alpha", "beta"]) & left.model_b.isin(["alpha", "beta"])]
    right = battles(rows=400, seed=4)
    right = right[right.model_a.isin(["gamma", "delta"]) & right.model_b.isin(["gamma", "delta"])]
    line = refused(capsys, tmp_path, pd.concat([left, right]))
    assert "the comparison graph is disconnected: 2 components" in line
    assert "{`alpha`, `beta`}" in line and "{`delta`, `gamma`}" in line


def test_separable_data_name_who_never_loses_and_never_wins(tmp_path, capsys):
    frame = battles(seed=5)
    frame = frame[~((frame.model_a == "alpha") & (frame.winner != "model_a"))]
    frame = frame[~((frame.model_b == "alpha") & (frame.winner != "model_b"))]
    frame = frame[~((frame.model_a == "delta") & (frame.winner != "model_b"))]
    frame = frame[~((frame.model_b == "delta") & (frame.winner != "model_a"))]
    line = refused(capsys, tmp_path, frame)
    assert "the data are separable: `alpha` never lost against the rest; `delta` never won against the rest" in line
    assert "--ridge" in line
    code, _, _ = run(capsys, write(frame, tmp_path / "r.csv"), "--out", tmp_path / "ridged", "--ridge", "1", "--quiet")
    assert code == 0  # a penalised leaderboard where asked for


def test_separable_within_a_category_is_named_with_it(tmp_path, capsys):
    frame = battles(rows=800, seed=6)
    math = frame.category == "math"
    frame = frame[~(math & (((frame.model_a == "beta") & (frame.winner != "model_a"))
                            | ((frame.model_b == "beta") & (frame.winner != "model_b"))))]
    line = refused(capsys, tmp_path, frame, "--category", "category")
    assert "`beta` never lost against the rest at category=math" in line


@pytest.mark.parametrize("value,what", [(np.nan, "missing or NaN"), (np.inf, "infinite or beyond 1e100")])
def test_nan_and_infinite_contexts_name_row_and_column(tmp_path, capsys, value, what):
    frame = battles()
    frame.loc[17, "length"] = value
    line = refused(capsys, tmp_path, frame, "--features", "length", suffix=".parquet")
    assert f"row 18, column 'length': {what} context value" in line


def test_a_bad_context_vector_names_row_and_column(tmp_path, capsys):
    frame = battles().assign(context="[1.0, 0.5]")
    frame.loc[5, "context"] = "[1.0, NaN]"
    line = refused(capsys, tmp_path, frame)
    assert "row 6 (file line 7), column 'context': expected a JSON list of numbers" in line or \
        "row 6 (file line 7), column 'context'" in line


def test_an_unknown_winner_value_names_row_and_column(tmp_path, capsys):
    frame = battles()
    frame.loc[9, "winner"] = "model_c"
    line = refused(capsys, tmp_path, frame)
    assert "row 10 (file line 11), column 'winner': unknown winner value 'model_c'; expected 'model_a', 'model_b', " \
           "'tie' or 'tie (bothbad)'" in line


def test_empty_files_and_values_name_row_and_column(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert refused(capsys, tmp_path, empty).endswith("empty.csv: the file is empty")
    header = tmp_path / "header.csv"
    header.write_text("model_a,model_b,winner\n")
    assert "header.csv: no judgment rows" in refused(capsys, tmp_path, header)
    blank = battles()
    blank.loc[3, "model_b"] = ""
    assert "row 4 (file line 5), column 'model_b': empty value" in refused(capsys, tmp_path, blank)
    missing = battles().drop(columns=["winner"])
    assert "missing column 'winner'" in refused(capsys, tmp_path, missing)
    same = battles()
    same.loc[2, "model_b"] = same.loc[2, "model_a"]
    assert "row 3 (file line 4), column 'model_b': the same model as model_a" in refused(capsys, tmp_path, same)
    jsonl = tmp_path / "empty.jsonl"
    jsonl.write_text("\n")
    assert "empty.jsonl" in refused(capsys, tmp_path, jsonl)


def test_bad_options_exit_2_too(tmp_path, capsys):
    frame = battles()
    assert "--anchor must be MODEL=RATING" in refused(capsys, tmp_path, frame, "--scale", "elo", "--anchor", "x")
    assert "no category column 'topic'" in refused(capsys, tmp_path, frame, "--category", "topic")
    assert "unknown category 'poetry'" in refused(capsys, tmp_path, frame, "--category", "category", "--at", "poetry")
    assert "needs a judge column" in refused(capsys, tmp_path, frame.drop(columns=["judge"]), "--se", "cluster")


@pytest.mark.parametrize("before_fit", [True, False])
def test_separable_data_with_numeric_contexts_are_refused(tmp_path, capsys, monkeypatch, before_fit):
    from study.leaderboard import checks
    if not before_fit:  # the linear program after the fit, which certifies nothing here (large designs)
        monkeypatch.setattr(checks, "SEPARATION_BEFORE_FIT", 0)
    frame = battles(rows=600, seed=9)
    frame = frame[~((frame.model_a == "alpha") & (frame.winner != "model_a"))]
    frame = frame[~((frame.model_b == "alpha") & (frame.winner != "model_b"))]
    line = refused(capsys, tmp_path, frame, "--features", "length")
    assert "the data are separable: along some direction of the contexts the comparisons of `alpha`" in line
