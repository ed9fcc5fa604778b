"""Results that cannot be corrupted, part two (issue 18), storage side: crafted commit records,
planted links, drop-damaged with a truncated record, verify's report, and a full disk or a lost
permission.  Each study is the issue's small one (regret, setting A, T=30, T0=10) with the cheap
stand-in replication."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from study import cli
from study.results import __main__ as results_main
from study.results import files, storage
from engine_support import fake_replicate

SMALL = ["--settings", "A", "--methods", "RB", "ETA", "--reps", "2", "--set", "T=30", "--set", "T0=10",
         "--no-progress", "--batch-size", "1"]


def run_regret(out, *extra):
    return cli.main("regret", ["--out", str(out), *SMALL, *extra], replicate=fake_replicate)


@pytest.fixture
def stored(ray_session, tmp_path):
    """A stored study and, beside it (outside --out), a victim directory with a precious file."""
    out = tmp_path / "out"
    assert run_regret(out) == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("precious")
    return out, victim


def snapshot(directory: Path) -> dict:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def forge(out, name, files_entry, keys=()):
    """Plant a commit record ``_commits/<name>.json`` naming ``files_entry``."""
    record = {"format": 2, "name": f"{name}.parquet", "run_id": "forged", "written": "2026-01-01T00:00:00",
              "files": files_entry, "keys": [list(k) for k in keys], "failed_keys": []}
    path = out / "regret" / "_commits" / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


# ---------------------------------------------------------------------------------------------
# 1. A commit record can name any file
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["../../victim/precious.txt", "ABSOLUTE", "../../victim"])
def test_forged_record_naming_outside_paths_is_damage_never_followed(stored, capsys, target):
    out, victim = stored
    before = snapshot(victim)
    if target == "ABSOLUTE":
        target = str(victim / "precious.txt")
    info = {"file": target, "sha256": "0" * 64, "bytes": 8, "rows": 1}
    record = forge(out, "part-forged-00000", {"trajectory": info})
    capsys.readouterr()
    verified = results_main.main(["verify", str(out), "regret"])
    report = capsys.readouterr().out
    # the recovery the tool recommends moves the record away and nothing outside --out
    assert results_main.main(["drop-damaged", str(out), "regret"]) == 0
    assert snapshot(victim) == before and (victim / "precious.txt").read_text() == "precious"
    assert (out / "regret" / "_damaged" / record.name).exists()
    # verify had reported the record as damage, naming it (exit 1), and never the file it names
    assert verified == 1
    assert record.name in report and "never followed" in report and "damaged: None" not in report
    assert results_main.main(["verify", str(out), "regret"]) == 0
    # and a later --fresh deletes nothing outside --out either
    assert run_regret(out, "--fresh") == 0
    assert snapshot(victim) == before


def test_part_of_another_run_with_a_correct_checksum_is_not_counted(stored, tmp_path):
    out, _ = stored
    clean = storage.load(out, "regret")
    assert len(clean) == 2 * 2 * 30
    other = tmp_path / "other"
    assert cli.main("regret", ["--out", str(other), *SMALL, "--seed", "7"], replicate=fake_replicate) == 0
    (_, theirs), *_ = storage.read_commits(other, "regret")
    source = other / "regret" / theirs["files"]["trajectory"]["file"]
    data = source.read_bytes()
    info = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            "rows": theirs["files"]["trajectory"]["rows"]}
    # (a) named through a path outside the dataset directory, checksum right
    rel = os.path.relpath(source, out / "regret")
    record = forge(out, "part-forged-00001", {"trajectory": {"file": rel, **info}})
    with pytest.raises(storage.StorageError, match=record.name):
        storage.load(out, "regret")
    record.unlink()
    # (b) copied in under the record's own name, with the key of a new replication in its record:
    # the part's own key columns are checked against its record
    name = "part-forged-00002"
    shutil.copy(source, out / "regret" / f"{name}.parquet")
    forge(out, name, {"trajectory": {"file": f"{name}.parquet", **info}}, keys=[("A", "RB", 20, 99)])
    with pytest.raises(storage.StorageError, match=f"{name}.parquet"):
        storage.load(out, "regret")
    # never silently more rows than the study holds
    (out / "regret" / "_commits" / f"{name}.json").unlink()
    (out / "regret" / f"{name}.parquet").unlink()
    pd.testing.assert_frame_equal(storage.load(out, "regret"), clean)


# ---------------------------------------------------------------------------------------------
# 2. Planted symlinks in a shared --out
# ---------------------------------------------------------------------------------------------

def test_planted_lock_symlink_is_refused_and_never_truncates(stored, capsys):
    out, victim = stored
    lock = out / "_study.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim / "precious.txt")
    capsys.readouterr()
    assert run_regret(out) == 2
    err = capsys.readouterr().err
    assert str(lock) in err and "symbolic link" in err and "Traceback" not in err
    assert (victim / "precious.txt").read_text() == "precious"
    # a hard link is refused as well (it would share the victim's bytes)
    lock.unlink()
    os.link(victim / "precious.txt", lock)
    assert run_regret(out) == 2
    assert "hard link" in capsys.readouterr().err
    assert (victim / "precious.txt").read_text() == "precious"


@pytest.mark.parametrize("fresh", [False, True])
def test_planted_dataset_directory_symlink_is_refused_before_anything_is_touched(stored, capsys, fresh):
    out, victim = stored
    for k in range(3):  # someone else's parts
        (victim / f"part-theirs-{k:05d}.parquet").write_bytes(b"their data")
    before_victim, before_traj = snapshot(victim), snapshot(out / "regret")
    link = out / "regret_intervals"
    shutil.rmtree(link)
    link.symlink_to(victim, target_is_directory=True)
    capsys.readouterr()
    assert run_regret(out, *(["--fresh"] if fresh else [])) == 2
    err = capsys.readouterr().err
    assert str(link) in err and "symbolic link" in err and "Traceback" not in err
    assert snapshot(victim) == before_victim  # nothing outside --out deleted
    assert snapshot(out / "regret") == before_traj  # and nothing of the study removed half-way
    assert link.is_symlink()
    # readers refuse too, naming the link
    with pytest.raises(storage.StorageError, match="regret_intervals"):
        storage.load(out, "regret")


# ---------------------------------------------------------------------------------------------
# 6. drop-damaged with a truncated record; verify's report; a full disk, a lost permission
# ---------------------------------------------------------------------------------------------

def test_drop_damaged_moves_the_parts_of_a_truncated_record_and_verify_names_it(stored, capsys):
    out, _ = stored
    (rpath, record), *_ = storage.read_commits(out, "regret")
    parts = {what: (storage.dataset_dirs(out, "regret")[what] / info["file"]) for what, info in record["files"].items()}
    contents = {what: p.read_bytes() for what, p in parts.items()}
    rpath.write_text(rpath.read_text()[:40])  # truncated
    capsys.readouterr()
    assert results_main.main(["verify", str(out), "regret"]) == 1
    report = capsys.readouterr().out
    assert "damaged: None" not in report and f"damaged: {rpath}" in report
    assert results_main.main(["drop-damaged", str(out), "regret"]) == 0
    damaged = out / "regret" / "_damaged"
    for what, path in parts.items():  # moved, not deleted
        assert not path.exists()
        assert (damaged / f"{what}-{path.name}").read_bytes() == contents[what]
    assert (damaged / rpath.name).exists()
    assert results_main.main(["verify", str(out), "regret"]) == 0
    assert run_regret(out) == 0  # and the rerun recomputes that batch
    assert len(storage.load(out, "regret")) == 2 * 2 * 30


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "No space left on device"),
                                         (errno.EACCES, "Permission denied")])
def test_full_disk_or_lost_permission_is_one_line_and_the_manifest_is_marked(ray_session, tmp_path, capsys,
                                                                             monkeypatch, code, words):
    replace = files._atomic_replace

    def failing(tmp, path):
        if str(path).endswith(".parquet"):  # the manifest can still be written, the parts cannot
            raise OSError(code, os.strerror(code), str(path))
        return replace(tmp, path)

    monkeypatch.setattr(files, "_atomic_replace", failing)
    out = tmp_path / "out"
    capsys.readouterr()
    assert run_regret(out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and words in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and ".parquet" in lines[0] and "rerun the same command" in lines[0]
    manifest = storage.read_manifest(out, "regret")
    assert manifest["runs"][-1]["status"] == "error" and words in manifest["runs"][-1]["error"]
    assert manifest["status"] != "running"
    assert not list(out.rglob("_tmp-*"))  # the failed write left no temporary file
    monkeypatch.setattr(files, "_atomic_replace", replace)
    assert run_regret(out) == 0  # space freed: the same command resumes
    assert len(storage.load(out, "regret")) == 2 * 2 * 30
