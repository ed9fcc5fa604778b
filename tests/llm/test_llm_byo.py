"""Bring-your-own judgments: format, end-to-end replay, and rejection of bad files."""
import json

import numpy as np
import pandas as pd
import pytest

from study.llm.byo import load_byo, read_judgments

CONTEXTS = {"q1": [1.0, 0.5], "q2": [1.0, -0.5], "q3": [1.0, 0.1]}
ROWS = [  # question_id, model_a, model_b, winner
    ("q1", "alpha", "beta", "a"), ("q1", "beta", "alpha", "a"), ("q1", "alpha", "beta", "tie"),
    ("q2", "alpha", "beta", "b"), ("q2", "beta", "gamma", "a"), ("q2", "gamma", "beta", "a"),
    ("q3", "alpha", "gamma", "tie"), ("q3", "gamma", "alpha", "b"), ("q3", "beta", "gamma", "B"),
    ("q1", "gamma", "beta", "b"), ("q3", "alpha", "beta", "a"), ("q2", "alpha", "gamma", "b"),
]


def frame(rows=ROWS):
    return pd.DataFrame({"question_id": [r[0] for r in rows], "model_a": [r[1] for r in rows],
                         "model_b": [r[2] for r in rows], "winner": [r[3] for r in rows],
                         "context": [json.dumps(CONTEXTS[r[0]]) for r in rows]})


def write_csv(tmp_path, df, name="judgments.csv"):
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


def test_byo_csv_end_to_end(tmp_path):
    path = write_csv(tmp_path, frame())
    env = load_byo(path, seed=5, T=60, M=3)
    assert env.models == ["alpha", "beta", "gamma"] and env.labels == env.models
    assert (env.n_items, env.dim, env.T, env.M) == (3, 2, 60, 3)
    assert env.edges.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert np.allclose(env.theta_star.sum(axis=0), 0) and np.all(np.isfinite(env.theta_star))
    assert env.question_ids == ["q1", "q2", "q3"]
    for t in range(1, env.T + 1):
        x = env.contexts[t - 1]
        assert any(np.allclose(x, v) for v in CONTEXTS.values())
        for a, b in ((0, 1), (1, 0), (0, 2), (2, 1)):
            w = env.compare(t, a, b)
            assert 0 <= w <= env.M and 2 * w == int(2 * w)
    # recorded outcomes only: on q2 beta beat alpha (its only judgment), on q3 alpha beat beta,
    # on q1 (alpha won, beta won, tie) every value in 0, 0.5, ..., 3 is possible
    steps = {q: [t for t in range(1, env.T + 1) if env.question_ids[env.questions[t - 1]] == q] for q in CONTEXTS}
    assert all(steps.values())
    assert all(env.compare(t, 0, 1) == 3.0 and env.compare(t, 1, 0) == 0.0 for t in steps["q2"])
    assert all(env.compare(t, 0, 1) == 0.0 and env.compare(t, 1, 0) == 3.0 for t in steps["q3"])
    assert all(env.compare(t, 0, 1) + env.compare(t, 1, 0) == 3.0 for t in steps["q1"])


def test_byo_parquet_with_vector_column(tmp_path):
    df = frame()
    df["context"] = [np.array(CONTEXTS[q]) for q in df.question_id]
    path = tmp_path / "judgments.parquet"
    df.to_parquet(path)
    env = load_byo(path, seed=1, T=20)
    assert env.dim == 2 and env.n_items == 3
    csv_env = load_byo(write_csv(tmp_path, frame()), seed=1, T=20)
    assert np.allclose(env.theta_star, csv_env.theta_star)
    assert [env.compare(t, 0, 2) for t in range(1, 21)] == [csv_env.compare(t, 0, 2) for t in range(1, 21)]


def test_byo_question_text_is_embedded_and_reduced(tmp_path):
    rows = []
    for k in range(5):
        rows += [(f"q{k}", "alpha", "beta", "a" if k % 2 else "b"), (f"q{k}", "beta", "gamma", "tie"),
                 (f"q{k}", "alpha", "gamma", "b" if k % 3 else "a")]
    df = pd.DataFrame(rows, columns=["question_id", "model_a", "model_b", "winner"])
    df["question"] = [f"text of {q}" for q in df.question_id]
    path = write_csv(tmp_path, df)

    def fake_embedder(texts):
        rng = np.random.default_rng(len(texts))
        return rng.standard_normal((len(texts), 8))

    env = load_byo(path, seed=2, T=10, dim=3, ridge=1e-3, embedder=fake_embedder)
    assert env.dim == 3 and np.allclose(env.question_contexts[:, 0], 1.0)
    assert env.compare(1, 0, 1) in (0.0, 0.5, 1.0)


@pytest.mark.parametrize("mutate, row, column, message", [
    (lambda d: d.assign(winner=d.winner.where(d.index != 2, "x")), 3, "winner", "expected one of"),
    (lambda d: d.assign(model_b=d.model_b.where(d.index != 4, d.model_a)), 5, "model_b", "same model"),
    (lambda d: d.assign(question_id=d.question_id.where(d.index != 0, "")), 1, "question_id", "empty"),
    (lambda d: d.assign(model_a=d.model_a.where(d.index != 6, " ")), 7, "model_a", "empty"),
    (lambda d: d.assign(context=d.context.where(d.index != 5, "[1.0, 0.5, 2.0]")), 6, "context", "length 3"),
    (lambda d: d.assign(context=d.context.where(d.index != 1, "1.0; 0.5")), 2, "context", "JSON list"),
    (lambda d: d.assign(context=d.context.where(d.index != 9, "[1.0, 0.7]")), 10, "context", "differs"),
    (lambda d: d.assign(context=d.context.where(d.index != 3, '[1.0, "a"]')), 4, "context", "non-numeric"),
    (lambda d: d.assign(context=d.context.where(d.index != 3, "[1.0, NaN]")), 4, "context", "NaN"),
])
def test_bad_rows_are_rejected_naming_row_and_column(tmp_path, mutate, row, column, message):
    path = write_csv(tmp_path, mutate(frame()))
    with pytest.raises(ValueError) as info:
        load_byo(path, seed=0)
    text = str(info.value)
    assert f"row {row} (file line {row + 1}), column '{column}'" in text
    assert message in text


def test_bad_parquet_row_names_row_and_column(tmp_path):
    df = frame()
    df["context"] = [np.array(CONTEXTS[q]) for q in df.question_id]
    df.loc[7, "winner"] = "draw"
    path = tmp_path / "bad.parquet"
    df.to_parquet(path)
    with pytest.raises(ValueError, match=r"row 8, column 'winner'"):
        read_judgments(path)


def test_bad_files_are_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"missing required column\(s\) \['winner'\]"):
        load_byo(write_csv(tmp_path, frame().drop(columns="winner")), seed=0)
    with pytest.raises(ValueError, match="'context' column .* or a 'question' column"):
        load_byo(write_csv(tmp_path, frame().drop(columns="context")), seed=0)
    with pytest.raises(ValueError, match="not connected"):
        rows = [("q1", "alpha", "beta", "a"), ("q1", "beta", "alpha", "a"), ("q2", "gamma", "delta", "a"),
                ("q2", "delta", "gamma", "a")]
        load_byo(write_csv(tmp_path, frame(rows)), seed=0, ridge=1e-3)
    with pytest.raises(ValueError, match="separable"):
        rows = [("q1", "alpha", "beta", "a"), ("q2", "beta", "alpha", "b"), ("q3", "alpha", "beta", "a")]
        load_byo(write_csv(tmp_path, frame(rows)), seed=0)
    (tmp_path / "x.txt").write_text("question_id\n")
    with pytest.raises(ValueError, match="expected a .csv or .parquet"):
        load_byo(tmp_path / "x.txt", seed=0)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_byo(tmp_path / "empty.csv", seed=0)
    with pytest.raises(ValueError, match="no judgment rows"):
        load_byo(write_csv(tmp_path, frame().iloc[:0]), seed=0)


def test_model_names_with_invisible_characters_are_escaped(tmp_path):
    """Bidirectional overrides (U+202E), isolates, marks and zero-width characters cannot change
    what a figure shows: they are replaced by visible escapes, and distinct names stay distinct."""
    from study.llm.byo import safe_label
    names = {"alpha": "alpha", "beta": "be\u202eta", "gamma": "gam\u2066ma\u200f"}
    rows = [(q, names[a], names[b], w) for q, a, b, w in ROWS]
    env = load_byo(write_csv(tmp_path, frame(rows)), seed=1, T=10)
    assert env.models == ["alpha", "be<U+202E>ta", "gam<U+2066>ma<U+200F>"]
    assert safe_label("GPT\u200b4\n") == "GPT<U+200B>4<U+000A>" and safe_label("plain é") == "plain é"


def test_judgments_directory_is_named_as_such(tmp_path, capsys):
    from study import cli
    from study.llm.runs import read_byo
    with pytest.raises(ValueError, match="is a directory"):
        read_byo(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main_llm(["--out", str(tmp_path / "out"), "--judgments", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "no such file" not in err
