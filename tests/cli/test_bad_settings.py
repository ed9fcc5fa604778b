"""Every bad settings file or value ends with exit status 2 and one message naming the file, the
table and the field, before Ray starts (issue 24): before, a deeply nested TOML or JSON file ended
in a RecursionError traceback, ``M = 10**400`` in an OverflowError, invalid UTF-8 in a message
without the file's name, a JSON table given twice silently kept the last, ``time_limit=1e10``
passed validation and crashed every replication, ``--set M=1e400`` raised an OverflowError and
``--set M=1.5`` ran with M = 1; a policy name with path characters was accepted."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import study
from study import cli

ROOT = Path(__file__).resolve().parents[2]
BIG = "1" + "0" * 400


# (file name, content, what the message must hold besides the file's name)
BAD_FILES = [
    ("deep.toml", '[X]\nbase = "A"\ntruth = ' + "[" * 100_000 + "]" * 100_000 + "\n", ["nested too deeply"]),
    ("deep.json", '{"X": {"base": "A", "truth": ' + "[" * 100_000 + "]" * 100_000 + "}}", ["nested too deeply"]),
    ("nested.json", '{"X": {"base": "A", "truth": ' + "[" * 12 + "1" + "]" * 12 + "}}", ["[X]", "'truth'", "nested"]),
    ("huge.toml", f'[X]\nbase = "A"\nM = {BIG}\n', ["[X]", "field 'M'", "about 401 digits"]),
    ("huge.json", f'{{"X": {{"base": "A", "M": {BIG}}}}}', ["[X]", "field 'M'", "about 401 digits"]),
    ("huge_real.toml", f'[X]\nbase = "A"\ngamma = {BIG}\n', ["[X]", "field 'gamma'", "must be finite"]),
    ("twice.json", '{"X": {"base": "A", "M": 10}, "X": {"base": "A", "M": 30}}', ["table [X] is given twice"]),
    ("field_twice.json", '{"X": {"base": "A", "M": 10, "M": 30}}', ["field 'M' is given twice"]),
    ("limit.toml", '[X]\nbase = "A"\ntime_limit = 1e10\n', ["[X]", "field 'time_limit'", "(0.0, 86400.0]"]),
    ("unknown.toml", '[X]\nbase = "A"\n[X.sub]\nM = 3\n', ["[X]", "field 'sub'"]),
    ("no_base.json", '{"X": {"n_items": 3, "dim": 2, "bogus": 1}}', ["[X]", "field 'bogus'", "not a setting field"]),
    ("float.toml", '[X]\nbase = "A"\nM = 1.5\n', ["[X]", "field 'M'", "must be an integer"]),
    ("name.toml", '["../evil"]\nbase = "A"\n', ["[../evil]", "setting name"]),
]


def _bad_utf8(tmp_path) -> Path:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[X]\nbase = "A"\n# caf\xe9\n')
    return path


@pytest.mark.parametrize("name, content, expected", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_settings_file_exits_2_naming_file_table_and_field(name, content, expected, tmp_path, capsys,
                                                                  clean_registry):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", ["--settings-file", str(path), "--settings", "X", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"settings file {path}" in err and "Traceback" not in err, err[-500:]
    assert all(e in err for e in expected), err[-500:]
    assert sum("error:" in line for line in err.splitlines()) == 1 and len(err) < 3000  # one message, no dump
    assert not (tmp_path / "out").exists()


def test_invalid_utf8_names_the_file(tmp_path, capsys):
    path = _bad_utf8(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", ["--settings-file", str(path), "--settings", "X", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"settings file {path}: not UTF-8 text (byte 0xe9" in err


BAD_VALUES = [
    (["--set", f"M={BIG}"], "about 401 digits"),
    (["--set", "M=1e400"], "M must be an integer, got inf"),
    (["--set", "M=1.5"], "M must be an integer, got 1.5"),
    (["--set", f"gamma={BIG}"], "gamma must be finite"),
    (["--set", "time_limit=1e10"], "time_limit must lie in (0.0, 86400.0]"),
    (["--set", "truth=" + "[" * 90 + "1" + "]" * 90], "truth must be numeric"),
]


@pytest.mark.parametrize("args, message", BAD_VALUES, ids=["huge-int", "inf", "fraction", "huge-real", "time_limit",
                                                           "deep-truth"])
def test_a_bad_value_exits_2_naming_the_field(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main("regret", ["--out", str(tmp_path / "out"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err) < 3000, err[-500:]


def test_as_a_user_runs_it_no_traceback(tmp_path):
    """The command as typed: exit 2, the message, no traceback, nothing written, no Ray."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"X": {"truth": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    huge = tmp_path / "huge.toml"
    huge.write_text(f'[X]\nbase = "A"\nM = {BIG}\n')
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    for args in (["--settings-file", str(deep), "--settings", "X"], ["--settings-file", str(huge), "--settings", "X"],
                 ["--settings-file", str(_bad_utf8(tmp_path)), "--settings", "X"], ["--set", "M=1e400"]):
        res = subprocess.run([sys.executable, str(ROOT / "jobs" / "regret.py"), "--out", str(tmp_path / "out"), *args],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert res.returncode == 2 and "Traceback" not in res.stderr and "error:" in res.stderr, res.stderr[-800:]
        assert not (tmp_path / "out").exists()


def test_time_limit_is_bounded():
    with pytest.raises(ValueError, match=r"time_limit must lie in \(0.0, 86400.0\]"):
        study.SETTINGS["A"].replace(time_limit=1e10)
    assert study.SETTINGS["A"].replace(time_limit=86400).time_limit == 86400


@pytest.mark.parametrize("name", ["x/../../y", "..", "a\\b", ".hidden", "tab\tname", "x" * 101])
def test_a_policy_name_with_path_characters_is_refused_at_registration(name):
    """Before: register_policy("x/../../y") was accepted, and writing the figures failed."""
    with pytest.raises(ValueError, match="part of file names"):
        study.register_policy(name, lambda setting: study.policies.make_policy("RB", setting))
    assert name not in study.policies.registered_policies()


def test_json_settings_files_keep_working(tmp_path, clean_registry):
    path = tmp_path / "fine.json"
    path.write_text(json.dumps({"B30": {"base": "B", "M": 30}, "tiny": {"n_items": 3, "dim": 2, "truth": "normal",
                                                                         "edges": [[0, 1], [1, 2]]}}))
    assert study.load_settings_file(path) == ["B30", "tiny"]
    assert study.resolve_setting("tiny").edges.tolist() == [[0, 1], [1, 2]]
