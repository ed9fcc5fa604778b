"""The published-board benchmark's log is what its docstring says (its timings are not asserted),
and each of its commands runs (on a small log)."""
from pathlib import Path

from benchmarks import leaderboard_boards as bench
from study.leaderboard.__main__ import main


def test_the_log_has_its_newcomer_dirty_names_and_many_judges():
    clean, dirty = bench.make_log(20_000, 12)
    counts = clean.model_a.value_counts() + clean.model_b.value_counts().reindex(clean.model_a.unique(), fill_value=0)
    assert counts["newcomer"] == 44 and set(clean.category) == set(bench.CATEGORIES)
    assert clean.judge.nunique() > 5_000
    assert {"MODEL-03", "model-07 ", "modle-11"} <= set(dirty.model_a) and "MODEL-03" not in set(clean.model_a)


def test_every_case_runs(tmp_path, capsys):
    clean, dirty = bench.make_log(6_000, 8)
    clean.to_parquet(tmp_path / "votes.parquet", index=False)
    dirty.to_parquet(tmp_path / "dirty.parquet", index=False)
    (tmp_path / "aliases.csv").write_text("alias,name\nmodle-11,model-11\n")
    for name, argv in bench.cases(Path(tmp_path), figures=False).items():
        argv = [a.replace("model-05", "model-02") for a in argv]
        assert main([*argv, "--out", str(tmp_path / name)]) == 0, (name, capsys.readouterr().err)
