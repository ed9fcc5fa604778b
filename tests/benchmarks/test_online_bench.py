"""benchmarks/online.py measures what it claims on a tiny case (its timings are not asserted)."""
import csv

from benchmarks import online


def test_the_online_benchmark_runs_and_splits_the_cost(tmp_path, capsys):
    assert online.main(["--items", "3", "--tells", "60", "120", "--window", "50", "--horizon", "150",
                        "--replay-reference", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "online.csv")))
    assert [(r["items"], r["tells"], r["T"]) for r in rows] == [("3", "60", "150"), ("3", "120", "150")]
    for r in rows:
        cpu, estimator, rest = float(r["cpu_ms"]), float(r["estimator_cpu_ms"]), float(r["rest_cpu_ms"])
        assert cpu > 0 and estimator > 0 and abs(estimator + rest - cpu) < 1e-9
        assert float(r["reopen_wall"]) > 0 and float(r["replay_wall"]) > 0 and float(r["show_wall"]) > 0
    assert "3     120" in capsys.readouterr().out
