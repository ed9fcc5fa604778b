"""Issue 35: records belong to runs.  A part with a correct SHA-256 and a commit record whose run id
the manifest never recorded was accepted (``verify`` ok, a resume skipped that replication,
``study.load`` returned its avg_regret 4.575 among 0.33-0.46); now such a record, and a part no
record names of a run the manifest does not record, are reported by ``verify`` and refused by
resume and ``load``, naming the file.  A part of a recorded run without its record (a crash
between the two writes) is still removed by the next run."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import study
from study import runner
from study.results import storage
from study.results.__main__ import main as results_main
from engine_support import fake_replicate

FORGED_RUN = "20990101T000000-f0f0f0"


def quiet(*_):
    pass


def run(out, reps=2, **kwargs):
    plan = runner.make_plan("regret", settings=["A"], methods=["RB"], reps=reps, overrides={"T": 30, "T0": 10})
    return runner.run_study(plan, out, replicate=fake_replicate, progress=False, log=quiet, **kwargs)


def forged_table(out):
    """Replication 0's rows relabelled as replication 2, with a huge regret."""
    table = pq.read_table(sorted((out / "regret").glob("part-*.parquet"))[0])
    table = table.filter(pc.equal(table["rep"], 0))
    table = table.set_column(table.schema.get_field_index("rep"), "rep", pa.array([2] * table.num_rows, pa.int32()))
    return table.set_column(table.schema.get_field_index("avg_regret"), "avg_regret",
                            pa.array([4.575] * table.num_rows, pa.float64()))


@pytest.fixture
def stored(ray_session, tmp_path):
    out = tmp_path / "out"
    assert run(out).ok
    return out


def test_a_forged_record_of_an_unknown_run_is_reported_and_refused(stored, capsys):
    name = f"part-{FORGED_RUN}-00000.parquet"
    storage.commit_batch(stored, "regret", name, {"trajectory": forged_table(stored)}, [], FORGED_RUN)
    record = stored / "regret" / "_commits" / f"part-{FORGED_RUN}-00000.json"
    assert results_main(["verify", str(stored)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {record}: names run '{FORGED_RUN}', which the study's manifest does not record" in out
    with pytest.raises(storage.DamagedPart, match=str(record)):
        study.load(stored, "regret")
    with pytest.raises(storage.DamagedPart, match=str(record)):  # a resume would have skipped rep 2
        run(stored, reps=3)
    assert results_main(["drop-damaged", str(stored), "regret"]) == 0
    capsys.readouterr()
    assert run(stored, reps=3).computed == 1
    assert study.load(stored, "regret").avg_regret.max() < 4.0


def test_a_part_no_record_names_of_an_unknown_run_is_refused(stored, capsys):
    planted = stored / "regret" / f"part-{FORGED_RUN}-00000.parquet"
    pq.write_table(forged_table(stored), planted)
    assert results_main(["verify", str(stored)]) == 1
    assert f"damaged: {planted}: a part no commit record names, of run '{FORGED_RUN}'" in capsys.readouterr().out
    with pytest.raises(storage.DamagedPart, match=str(planted)):
        study.load(stored, "regret")
    with pytest.raises(storage.DamagedPart, match=str(planted)):
        run(stored, reps=3)
    assert planted.exists()  # refused, never deleted
    assert results_main(["drop-damaged", str(stored), "regret"]) == 0
    assert not planted.exists() and (stored / "regret" / "_damaged" / f"trajectory-{planted.name}").exists()
    assert run(stored, reps=3).ok


def test_a_crash_leftover_of_a_recorded_run_is_still_cleaned_up(stored):
    run_id = storage.read_manifest(stored, "regret")["runs"][-1]["run_id"]
    leftover = stored / "regret" / f"part-{run_id}-09999.parquet"
    pq.write_table(forged_table(stored), leftover)
    assert storage.verify(stored, "regret")["uncommitted"] == [leftover]
    assert study.load(stored, "regret").avg_regret.max() < 4.0  # not counted, not refused
    assert run(stored, reps=3).computed == 1 and not leftover.exists()
