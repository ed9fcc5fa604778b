"""Results that cannot be corrupted (issue 11), storage side: damaged parts, duplicated keys, the
study lock, corrupt manifests, uncommitted parts, reuse of identical cells, lazy plans and the
flags that must be refused before Ray starts.  Subprocess drivers (a second driver on the same
--out, the bind address of the embedded Ray, a double SIGINT) are in test_engine_safety.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest

from study import cli
from study.results import storage
from study.runner import batching
from study.results import __main__ as results_main
from study import runner
from engine_support import fake_replicate

SUPPORT_DIR = Path(__file__).resolve().parents[1] / "support"
ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "T=30", "--set", "T0=10", "--no-progress"]
SMALL = ["--reps", "3", "--settings", "A", "--methods", "RB", "ETA", *TINY]


def run_regret(out, *extra, batch="1"):
    return cli.main("regret", ["--out", str(out), *SMALL, "--batch-size", batch, *extra], replicate=fake_replicate)


def run_per_batch(out):
    """The same study as run_regret, one commit per batch (flushed at once)."""
    plan = runner.make_plan("regret", reps=3, settings=["A"], methods=["RB", "ETA"], overrides={"T": 30, "T0": 10})
    report = runner.run_study(plan, out, replicate=fake_replicate, batch_size=1, flush_seconds=0, progress=False)
    assert report.ok


def flip(path: Path, n=64):
    """Invert ``n`` bytes in the middle of ``path`` (the Parquet footer stays intact)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 3
    data[mid:mid + n] = bytes(b ^ 0xFF for b in data[mid:mid + n])
    path.write_bytes(bytes(data))


def no_traceback_one_line(err: str):
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith(("error", "jobs/", "regret"))]) >= 1


# ---------------------------------------------------------------------------------------------
# Damaged parts
# ---------------------------------------------------------------------------------------------

def test_flipped_bytes_are_detected_named_and_recomputed(ray_session, tmp_path, capsys):
    assert run_regret(tmp_path / "clean") == 0
    out = tmp_path / "damaged"
    run_per_batch(out)
    records = storage.read_commits(out, "regret")
    assert len(records) >= 2 and all(r["files"]["trajectory"]["sha256"] for _, r in records)
    victim = out / "regret" / records[0][1]["files"]["trajectory"]["file"]
    lost = len(records[0][1]["keys"])
    flip(victim)
    capsys.readouterr()
    # load (and so the figures and the summary) refuses, naming the file and the recovery
    with pytest.raises(storage.DamagedPart, match=victim.name) as exc:
        storage.load(out, "regret")
    assert "drop-damaged" in str(exc.value)
    # resume refuses too: exit 2, one line naming the file
    assert run_regret(out) == 2
    err = capsys.readouterr().err
    assert victim.name in err and "damaged" in err and "Traceback" not in err
    assert cli.main_figures(["--out", str(out)]) == 2
    assert victim.name in capsys.readouterr().err
    # the documented recovery: verify names it (exit 1), drop-damaged moves the batch away, and
    # rerunning the command recomputes exactly its replications
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "study.results", "verify", str(out)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 1 and victim.name in res.stdout and "drop-damaged" in res.stdout
    assert results_main.main(["drop-damaged", str(out), "regret"]) == 0
    assert (out / "regret" / "_damaged" / f"trajectory-{victim.name}").exists()
    assert results_main.main(["verify", str(out), "regret"]) == 0
    assert run_regret(out) == 0
    assert storage.read_manifest(out, "regret")["runs"][-1]["computed"] == lost
    pd.testing.assert_frame_equal(storage.load(out, "regret"), storage.load(tmp_path / "clean", "regret"))


def test_truncated_part_and_unreadable_record_are_named(ray_session, tmp_path, capsys):
    assert run_regret(tmp_path, batch="3") == 0
    (_, record), *_ = storage.read_commits(tmp_path, "regret")
    part = tmp_path / "regret" / record["files"]["trajectory"]["file"]
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(storage.DamagedPart, match=f"{part.name}.*size"):
        storage.stored_keys(tmp_path, "regret")
    rec = sorted((tmp_path / "regret" / "_commits").glob("*.json"))[-1]
    rec.write_text("{not json")
    with pytest.raises(storage.DamagedPart, match=rec.name):
        storage.load(tmp_path, "regret")
    capsys.readouterr()
    assert run_regret(tmp_path, batch="3") == 2
    err = capsys.readouterr().err
    assert rec.name in err and "Traceback" not in err


def test_duplicated_keys_are_an_error_naming_both_files(ray_session, tmp_path, capsys):
    assert run_regret(tmp_path, batch="3") == 0
    (rpath, record), *_ = storage.read_commits(tmp_path, "regret")
    name = record["files"]["trajectory"]["file"]
    copy = name.replace("part-", "part-zz-copy-")
    dirs = storage.dataset_dirs(tmp_path, "regret")
    for what, info in record["files"].items():  # the batch copied whole (trajectory and costs parts)
        shutil.copy(dirs[what] / name, dirs[what] / copy)
        info["file"] = copy
    (rpath.parent / (Path(copy).stem + ".json")).write_text(json.dumps(record))
    with pytest.raises(storage.DuplicateKeys) as exc:
        storage.load(tmp_path, "regret")
    assert name in str(exc.value) and copy in str(exc.value)
    from study.results.summary import write_summary
    with pytest.raises(storage.DuplicateKeys):
        write_summary(tmp_path)
    capsys.readouterr()
    assert cli.main_figures(["--out", str(tmp_path)]) == 2
    assert copy in capsys.readouterr().err


def test_uncommitted_parts_are_ignored_and_cleaned(ray_session, tmp_path):
    assert run_regret(tmp_path, batch="3") == 0
    before = storage.load(tmp_path, "regret")
    (_, record), *_ = storage.read_commits(tmp_path, "regret")
    # a part whose record never got written, of a run the manifest records (a part of no run is refused:
    # tests/results/test_records_belong_to_runs.py)
    stray = tmp_path / "regret" / f"part-{record['run_id']}-09999.parquet"
    shutil.copy(tmp_path / "regret" / record["files"]["trajectory"]["file"], stray)
    (tmp_path / "regret" / "_tmp-abc-part.parquet").write_bytes(b"partial")
    pd.testing.assert_frame_equal(storage.load(tmp_path, "regret"), before)
    assert run_regret(tmp_path, batch="3") == 0
    assert not stray.exists() and not list((tmp_path / "regret").glob("_tmp-*"))


def test_corrupt_manifest_is_one_line_exit_2(ray_session, tmp_path, capsys):
    assert run_regret(tmp_path) == 0
    path = tmp_path / "regret" / "_manifest.json"
    path.write_text('{"study": "regret", "runs": [')
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run_regret(tmp_path)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert str(path) in err and "unreadable manifest" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------
# The study lock
# ---------------------------------------------------------------------------------------------

def _holder(out, seconds, *flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(SUPPORT_DIR)]))
    return subprocess.Popen([sys.executable, str(SUPPORT_DIR / "lock_holder.py"), str(out), str(seconds), *flags],
                            stdin=subprocess.PIPE if flags else None, stdout=subprocess.PIPE, text=True, env=env)


def test_lock_refuses_a_second_writer_and_is_released_by_a_crash(ray_session, tmp_path, capsys):
    holder = _holder(tmp_path, 60)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert run_regret(tmp_path) == 2
        err = capsys.readouterr().err
        assert "in use by run holder-run" in err and f"pid {holder.pid}" in err and "lock_holder.py" in err
        assert not (tmp_path / "regret").exists()  # refused before anything was written
        assert cli.main_paper(["--out", str(tmp_path), "--quick", *TINY], replicate=fake_replicate) == 2
    finally:
        holder.kill()  # kill -9: the kernel releases the lock
        holder.wait()
    assert run_regret(tmp_path) == 0


def test_two_writers_started_together_one_is_refused(tmp_path):
    # both ask for the lock once both are up, and the one that gets it holds it until both have
    # answered: however slowly a loaded machine starts them, they meet
    holders = [_holder(tmp_path, 60, "--together") for _ in range(2)]
    assert [h.stdout.readline().strip() for h in holders] == ["ready", "ready"]
    for h in holders:
        h.stdin.write("go\n")
        h.stdin.flush()
    lines = sorted(h.stdout.readline().strip() for h in holders)
    for h in holders:
        h.stdin.close()
    codes = sorted(h.wait(timeout=60) for h in holders)
    assert lines[0] == "locked" and lines[1].startswith("refused: ") and "holder-run" in lines[1]
    assert codes == [0, 2]


# ---------------------------------------------------------------------------------------------
# Identical cells are computed once
# ---------------------------------------------------------------------------------------------

def test_msweep_reuses_the_identical_cells_of_regret(ray_session, tmp_path):
    common = ["--reps", "3", "--methods", "RB", "ETA", *TINY]
    sweep = common + ["--m-values", "20", "50"]  # A/M=20 and B/M=50 are Settings A and B as in regret
    assert cli.main("regret", ["--out", str(tmp_path / "both"), *common], replicate=fake_replicate) == 0
    assert cli.main("msweep", ["--out", str(tmp_path / "both"), *sweep], replicate=fake_replicate) == 0
    run = storage.read_manifest(tmp_path / "both", "msweep")["runs"][-1]
    assert run["reused"] == {"replications": 2 * 2 * 3, "from": {"regret": 12}}
    assert run["computed"] == 2 * 2 * 2 * 3 - 12
    assert cli.main("msweep", ["--out", str(tmp_path / "alone"), *sweep], replicate=fake_replicate) == 0
    reused, alone = storage.load(tmp_path / "both", "msweep"), storage.load(tmp_path / "alone", "msweep")
    pd.testing.assert_frame_equal(reused, alone)
    assert set(reused["study"]) == {"msweep"}
    regret = storage.load(tmp_path / "both", "regret")
    a20 = reused[(reused.setting == "A") & (reused.M == 20)].drop(columns="study").reset_index(drop=True)
    pd.testing.assert_frame_equal(a20, regret[regret.setting == "A"].drop(columns="study").reset_index(drop=True))
    # a different configuration is not reused
    assert cli.main("msweep", ["--out", str(tmp_path / "both"), *sweep, "--set", "alpha=0.3", "--fresh"],
                    replicate=fake_replicate) == 0
    assert storage.read_manifest(tmp_path / "both", "msweep")["runs"][-1]["reused"]["replications"] == 0


# ---------------------------------------------------------------------------------------------
# Unbounded inputs
# ---------------------------------------------------------------------------------------------

def test_plans_are_lazy():
    plan = runner.make_plan("regret", reps=runner.MAX_REPS)
    assert plan.n_replications == 10 * runner.MAX_REPS
    tracemalloc.start()
    batches = batching.batches(plan, set(), lambda: 25)
    first = [next(batches) for _ in range(3)]
    keys = plan.keys()
    [next(keys) for _ in range(1000)]
    assert plan.count_stored({("A", "RB", 20, 5), ("A", "RB", 20, runner.MAX_REPS)}) == 1
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5e6 and [len(b[1]) for b in first] == [25, 25, 25]
    with pytest.raises(ValueError, match="at most 1,000,000"):
        runner.make_plan("regret", reps=10 ** 12)


@pytest.mark.parametrize("args, message", [
    (["--reps", "1000000000000"], "at most 1,000,000"),
    (["--num-cpus", "1000"], "exceeds this machine's"),
])
def test_unbounded_flags_refused_before_ray(tmp_path, args, message):
    start = time.perf_counter()
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, str(ROOT / "jobs" / "regret.py"), "--out", str(tmp_path), *args],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert "Started a local Ray" not in res.stderr and time.perf_counter() - start < 30


def test_unreachable_address_fails_fast_naming_it(tmp_path):
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    for address in ("garbage.invalid:1", "127.0.0.1:1"):
        start = time.perf_counter()
        res = subprocess.run([sys.executable, str(ROOT / "jobs" / "regret.py"), "--out", str(tmp_path),
                              "--address", address, "--quick"], capture_output=True, text=True, timeout=120, env=env)
        assert res.returncode == 1, res.stderr[-2000:]
        assert f"could not connect to a Ray cluster at {address!r}" in res.stderr
        assert "Traceback" not in res.stderr and time.perf_counter() - start < 30


def test_unusable_out_refused_before_ray(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = [(afile, "exists and is not a directory"), (afile / "sub", "is not a directory")]
    if os.geteuid() == 0:  # root writes into read-only directories; /proc refuses even root
        cases.append((Path("/proc/study-out"), "cannot be created"))
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        cases.append((ro, "not writable"))
    for out, message in cases:
        with pytest.raises(SystemExit) as exc:
            cli.main("regret", ["--out", str(out), "--quick"])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


def test_a_killed_run_is_marked_died_by_the_next(ray_session, tmp_path):
    """kill -9 leaves the manifest saying "running"; the next run (holding the lock, so the other
    is certainly gone) marks it "died"."""
    assert run_regret(tmp_path) == 0
    manifest = storage.read_manifest(tmp_path, "regret")
    manifest["runs"][-1]["status"] = manifest["status"] = "running"
    storage.write_manifest(manifest, tmp_path, "regret")
    assert run_regret(tmp_path) == 0
    runs = storage.read_manifest(tmp_path, "regret")["runs"]
    assert [r["status"] for r in runs] == ["died", "complete"]
