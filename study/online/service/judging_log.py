"""The judging page's battle log read beside the store (``STORE.judging.jsonl``, written by
:mod:`study.online.service.judge_routes` when ``python -m study.online serve STORE --prompts FILE
--responses FILE`` serves the page).

The store holds every vote that was told to the ranker, with its judge, side and time
(:mod:`study.online.export`); its ``question_id`` is the ranker's ticket.  The log adds what the
store cannot hold: the pool's question id of each ticket, the seconds a judge took, and the
re-served battles (a share served to a second judge to measure agreement, not told to the ranker).

* :func:`with_prompts` -- an export's ``question_id`` replaced by the pool's question id where the
  log names the ticket (the ticket kept in a ``ticket`` column): what ``python -m study.online
  export`` writes when the log exists;
* :func:`report_rows` -- the battles of a judge report (``python -m study.online judges report
  STORE``): the exported rows with the pool's question ids and the judges' seconds, and the
  re-served battles of the log.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


def read_log(log) -> pd.DataFrame:
    """The log's rows (ValueError naming the file and line of a row that is not JSON)."""
    rows = []
    for number, line in enumerate(Path(log).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{log}: line {number}: {exc}") from None
        if not isinstance(row, dict) or not {"question_id", "judge", "model_a", "model_b", "winner"} <= set(row):
            raise ValueError(f"{log}: line {number}: not a vote of the judging page")
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["model_a", "model_b", "winner", "judge", "left", "seconds", "tstamp",
                                        "question_id", "ticket"])
    frame["question_id"] = frame["question_id"].astype(str)
    return frame


def with_prompts(frame: pd.DataFrame, log) -> pd.DataFrame:
    """The export ``frame`` with the pool's question ids (module docstring); rows whose ticket the
    log does not name (told through the API, say) keep the ticket's number, as text."""
    votes = read_log(log)
    told = votes[votes["ticket"].notna()]
    prompt = dict(zip(told["ticket"].astype(int), told["question_id"]))
    out = frame.copy()
    out["ticket"] = frame["question_id"].astype(int)
    out["question_id"] = [prompt.get(t, str(t)) for t in out["ticket"]]
    return out


def report_rows(frame: pd.DataFrame, log) -> pd.DataFrame:
    """The battles of a judge report (module docstring) from the export ``frame`` and the log:
    model_a, model_b, winner, judge, side, question_id and seconds (the log's) or tstamp."""
    votes = read_log(log)
    told = votes[votes["ticket"].notna()]
    seconds = dict(zip(told["ticket"].astype(int), told["seconds"].astype(float)))
    rows = with_prompts(frame, log)
    again = votes[votes["ticket"].isna()]  # re-served: model_a is the left model
    again = again.assign(side="a")[["model_a", "model_b", "winner", "judge", "side", "question_id", "seconds",
                                     "tstamp"]]
    if rows["ticket"].isin(seconds.keys()).all():
        rows = rows.assign(seconds=[seconds[t] for t in rows["ticket"]])
        keep = ["model_a", "model_b", "winner", "judge", "side", "question_id", "seconds"]
    else:  # some tells came without the page: the times between a judge's votes instead
        keep = ["model_a", "model_b", "winner", "judge", "side", "question_id", "tstamp"]
    rows = rows[keep]
    return pd.concat([rows, again[keep]], ignore_index=True) if len(again) else rows.reset_index(drop=True)
