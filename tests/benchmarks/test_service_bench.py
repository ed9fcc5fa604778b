"""benchmarks/service.py measures what it claims on a tiny case (its timings are not asserted), and
its fault run finds no acknowledged tell lost after kill -9s of the server under load."""
import json

from benchmarks import service


def test_the_service_benchmark_runs_in_process_one_judge_and_many(tmp_path, capsys):
    assert service.main(["--items", "3", "--dim", "2", "--tells", "40", "--judges", "2", "--blocks", "2",
                         "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "service.json").read_text())
    assert result["inprocess_rate"] > 0 and result["http_rate"] > 0
    out = capsys.readouterr().out
    assert "in-process" in out and "one judge over HTTP" in out and "2 judges over HTTP" in out
    assert "added per tell (p50, one judge)" in out


def test_kill_9s_under_load_lose_no_acknowledged_tell(tmp_path, capsys):
    assert service.main(["--items", "3", "--dim", "2", "--tells", "300", "--judges", "3", "--kills", "3",
                         "--out", str(tmp_path)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "3 kill -9" in out and "0 lost, 0 with another outcome, 0 stored but not acknowledged" in out
