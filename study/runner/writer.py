"""The driver's buffer of finished batches, committed to storage at most every ``flush_seconds``
(or ``flush_rows``), so that an interrupt or a crash loses little."""
from __future__ import annotations

import time

import pyarrow as pa

from ..results import storage
from ..results.schema import COST_SCHEMA, FAILURE_SCHEMA, INTERVAL_SCHEMA, TRAJECTORY_SCHEMA


class Writer:
    """Buffers batch results in the driver and commits them (:func:`study.results.storage.commit_batch`)."""

    def __init__(self, out, study, run_id):
        self.out, self.study, self.run_id = out, study, run_id
        self.seq = 0
        self.stored = 0  # successful replications committed
        self.numerics = {}  # numerics key -> what it names (study.runner.numerics), of every task so far
        self._reset()

    def _reset(self):
        self.traj, self.ints, self.costs, self.fails = [], [], [], []
        self.rows = 0
        self.counts = {}  # numerics key -> replications buffered
        self.last_flush = time.monotonic()

    def add(self, result: dict, replications: int = 0):
        """Buffer one task's result (:func:`study.runner.worker.run_batch`) holding ``replications``
        stored replications (counted under the numerics they were computed with)."""
        info = result.get("numerics")
        if info and replications:
            self.numerics.setdefault(info["key"], info)
            self.counts[info["key"]] = self.counts.get(info["key"], 0) + replications
        if result["trajectory"].num_rows:
            self.traj.append(result["trajectory"])
        if result["intervals"].num_rows:
            self.ints.append(result["intervals"])
        if result.get("costs") is not None and result["costs"].num_rows:  # (results of older workers lack it)
            self.costs.append(result["costs"])
        self.fails.extend(result["failures"])
        self.rows += result["trajectory"].num_rows + result["intervals"].num_rows

    def due(self, max_rows, max_seconds) -> bool:
        pending = self.traj or self.ints or self.fails
        return bool(pending) and (self.rows >= max_rows or time.monotonic() - self.last_flush >= max_seconds)

    def flush(self):
        """Commit everything buffered as one batch."""
        if not (self.traj or self.ints or self.fails):
            return
        tables = {"trajectory": pa.concat_tables(self.traj) if self.traj else TRAJECTORY_SCHEMA.empty_table(),
                  "intervals": pa.concat_tables(self.ints) if self.ints else INTERVAL_SCHEMA.empty_table(),
                  "failures": pa.Table.from_pylist(self.fails, schema=FAILURE_SCHEMA),
                  "costs": pa.concat_tables(self.costs) if self.costs else COST_SCHEMA.empty_table()}
        failed = [(f["setting"], f["method"], f["M"], f["rep"]) for f in self.fails]
        try:
            record = storage.commit_batch(self.out, self.study, f"part-{self.run_id}-{self.seq:05d}.parquet",
                                          tables, failed, self.run_id, numerics=dict(self.counts))
        except storage.StorageError:
            self._reset()  # unwritable (full disk, lost permission): the run stops; never retried in a loop
            raise
        self.seq += 1
        self.stored += len(record["keys"])
        self._reset()
