"""What a leaderboard writes: the table as Markdown (what it is above it, in words), CSV and JSON
(the table and what it is, as data)."""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

FORMATS = ("md", "csv", "json")


def _number(value: float, scale: str) -> str:
    return f"{value:.0f}" if scale == "elo" else f"{value:.3f}"


def header(meta: dict) -> list:
    """The lines that say what a table is."""
    at = ""
    if meta["contextual"]:
        point = ", ".join(f"{name}: {value:.3g}" for name, value in zip(meta["context_names"], meta["context"]))
        at = f" at the context ({point})"
    scale = ("Elo-style scale: 1000 + 400/ln(10) x the logit score" if meta["scale"] == "elo"
             else "logit scale: x'theta, summing to 0 over the models")
    judges = f" by {meta['judges']:,} judges" if meta["judges"] else ""
    lines = [f"Leaderboard of {meta['source']}: {meta['models']} models, {meta['comparisons']:,.0f} comparisons{judges}"
             f"{at}.",
             f"Score on the {scale}; interval: {meta['interval']}, {meta['se_text']}; rank interval: "
             f"{meta['rank_interval']}, all models at once. Tie rule {meta['tie_rule']!r}"
             f"{'; ridge ' + format(meta['ridge'], 'g') if meta['ridge'] else ''}."]
    anchor = meta.get("anchor")
    if anchor:
        lines.append(f"Anchored: `{anchor['model']}` = {anchor['rating']:g}; each rating's interval is that of its "
                     f"difference from `{anchor['model']}` (zero width for it).")
    lines += [f"Note: {note}." for note in meta["notes"]]
    return lines


def markdown(table: pd.DataFrame) -> str:
    meta = table.attrs
    scale = meta["scale"]
    rows = ["| rank | rank interval | model | score | interval | judgments | win rate | ties |",
            "|---:|:---:|---|---:|:---:|---:|---:|---:|"]
    for r in table.itertuples(index=False):
        interval = f"{_number(r.lower, scale)} to {_number(r.upper, scale)}"
        ranks = f"{r.rank_lower}" if r.rank_lower == r.rank_upper else f"{r.rank_lower}-{r.rank_upper}"
        name = str(r.model).replace("|", "\\|")
        rows.append(f"| {r.rank} | {ranks} | {name} | {_number(r.score, scale)} | {interval} | {r.judgments:,} | "
                    f"{r.win_rate:.3f} | {r.ties:,} |")
    return "\n".join(header(meta) + [""] + rows) + "\n"


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _inert(value):
    """A text cell a spreadsheet would run as a formula (``=HYPERLINK(...)``, ``+1``, ``@SUM``), with a
    ``'`` in front (OWASP's CSV-injection advice); numbers are left as they are."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


def neutralised(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` whose text cells starting with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return have a ``'`` in front, so that a spreadsheet shows them as text instead of
    running them as formulas; every CSV the leaderboard writes goes through it."""
    table = table.copy()
    for column in table.columns:
        if table[column].dtype == object or pd.api.types.is_string_dtype(table[column].dtype):
            table[column] = table[column].map(_inert)
    return table


def csv_text(table: pd.DataFrame) -> str:
    table = neutralised(table)
    anchor = table.attrs.get("anchor")
    if anchor:  # the ratings mean nothing without it: on every row
        table = table.assign(anchor=f"{anchor['model']}={anchor['rating']:g}")
    return table.to_csv(index=False)


def plain(value):
    """``value`` with numpy scalars as Python ones and non-finite numbers as None (JSON's null),
    inside dicts, lists and tuples too: what every JSON file of the leaderboard writes."""
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def records(table: pd.DataFrame) -> list:
    """The rows of ``table`` as JSON-ready dicts (:func:`plain`)."""
    return [plain(row) for row in table.to_dict(orient="records")]


def json_text(table: pd.DataFrame) -> str:
    return json.dumps({"leaderboard": plain(dict(table.attrs)), "models": records(table)}, indent=1) + "\n"


def render(table: pd.DataFrame, formats=FORMATS) -> dict:
    """{file name: text} of the table in ``formats``."""
    writers = {"md": markdown, "csv": csv_text, "json": json_text}
    return {f"leaderboard.{kind}": writers[kind](table) for kind in formats}


def _write_one(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())  # a full disk may only say so here (delayed allocation)


def write_all(out, files: dict) -> None:
    """Write ``files`` ({relative name: bytes}) under the directory ``out`` whole or not at all: into
    a temporary directory beside ``out`` (the same file system), then moved in by renames -- the
    whole directory where ``out`` is new, file by file (each ``os.replace`` atomic, no data written)
    where it exists.  A failure (a full disk) leaves ``out`` as it was and no temporary directory."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OSError(f"{out} exists and is not a directory")
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
    try:
        for name, data in files.items():
            target = partial / name
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_one(target, data)
        if not out.exists():
            os.rename(partial, out)
            return
        for name in files:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial / name, out / name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
