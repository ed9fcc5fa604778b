"""examples/online_llm.py, run as a user runs it after a fresh clone: an annotation loop against the
LLM replay's judge, continued by a second run, then inspected with python -m study.online show."""
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "online_llm.py"


def run(*args, cwd):
    out = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_example_runs_continues_and_shows(tmp_path):
    first = run(EXAMPLE, "--asks", "120", "--store", "loop.sqlite", cwd=tmp_path)
    assert "120 judgments told" in first and "120 in loop.sqlite" in first
    assert "GPT-4o mini" in first and "sandwich" in first
    second = run(EXAMPLE, "--asks", "40", "--store", "loop.sqlite", cwd=tmp_path)
    assert "40 judgments told" in second and "160 in loop.sqlite" in second
    shown = run("-m", "study.online", "show", "loop.sqlite", cwd=tmp_path)
    assert "asked 160: told 160, open 0, expired 0" in shown
    assert (tmp_path / "loop.sqlite_diagram.png").stat().st_size > 1000
