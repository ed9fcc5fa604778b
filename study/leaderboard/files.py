"""Reading a file of judgments into an Arrow table: CSV, Parquet, JSON (an array of records, or one
record per line) and JSON Lines, read by pyarrow's readers (multi-threaded, a million rows in well
under a second) except a JSON array, which the standard library parses.

Every problem is a :class:`LeaderboardInputError` (a ``ValueError``) of one line naming the file:
no such file, an empty file, a file without rows, a format it cannot parse.  Rows are numbered
from 1 (the header excluded); :func:`where` names a row and column as the messages of the project's
judgments files do (``row 3 (file line 4), column 'winner'``).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa

SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json", ".jsonl": "jsonl",
            ".ndjson": "jsonl"}
TEXT_COLUMNS = ("model_a", "model_b", "winner", "judge", "question_id", "question", "context")
# sizes checked before anything is parsed: the judgments reader's cap (study.llm.byo), and a lower one for
# a JSON array, which the standard library parses whole into Python objects (about ten times its size:
# a 129 MB array took 1.27 GB); JSON Lines, CSV and Parquet are read by pyarrow in a few times their size
MAX_FILE_BYTES = 512 * 2**20
MAX_JSON_ARRAY_BYTES = 32 * 2**20


class LeaderboardInputError(ValueError):
    """Input a leaderboard cannot be made from; the message is one line naming what and where."""


def where(kind: str, row: int, column: str) -> str:
    """``row r[ (file line L)], column 'c'`` for the 0-based data row ``row``."""
    line = {"csv": f" (file line {row + 2})", "jsonl": f" (line {row + 1})"}.get(kind, "")
    return f"row {row + 1}{line}, column {column!r}"


def read_table(path, columns=None) -> tuple[pa.Table, str]:
    """(table, kind) of the file at ``path``; kind is ``csv``, ``parquet``, ``json`` or ``jsonl``.
    ``columns``: the columns that may be used (Parquet and CSV read only those the file has)."""
    path = Path(path)
    if path.is_dir():
        raise LeaderboardInputError(f"{path}: is a directory; give a CSV, Parquet, JSON or JSON Lines file")
    if not path.is_file():
        raise LeaderboardInputError(f"{path}: no such file")
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise LeaderboardInputError(f"{path}: unknown suffix {path.suffix!r}; expected one of {sorted(SUFFIXES)}")
    size = path.stat().st_size
    if size == 0:
        raise LeaderboardInputError(f"{path}: the file is empty")
    if size > MAX_FILE_BYTES:
        raise LeaderboardInputError(f"{path}: {size / 2**20:,.0f} MiB; files above {MAX_FILE_BYTES // 2**20} MiB are "
                                    "refused before reading (aggregate repeated judgments as counts, or split the "
                                    "file)")
    try:
        table, kind = _read(path, kind, None if columns is None else set(columns))
    except LeaderboardInputError:
        raise
    except RecursionError:  # a JSON array nested too deep for the standard library's parser
        raise LeaderboardInputError(f"{path}: cannot read it as JSON: nested too deep (an array of records, "
                                    "one object per judgment, is expected)") from None
    except (pa.ArrowException, ValueError, UnicodeDecodeError, OSError) as exc:
        text = " ".join(str(exc).split())
        raise LeaderboardInputError(f"{path}: cannot read it as {kind.upper()}: {text}") from None
    if table.num_rows == 0:
        raise LeaderboardInputError(f"{path}: no judgment rows (columns {table.column_names})")
    return table, kind


def _read(path: Path, kind: str, columns) -> tuple[pa.Table, str]:
    if kind == "parquet":
        import pyarrow.parquet as pq
        names = pq.read_schema(path).names
        return pq.read_table(path, columns=None if columns is None else [c for c in names if c in columns]), kind
    if kind == "csv":
        import pyarrow.csv as pcsv
        # names and labels are text even where they look like numbers (a model called "7")
        # only an empty cell is missing: a model called NA, null or nan is a name (pyarrow's default
        # null values would read them as missing); an empty numeric cell is still missing
        options = pcsv.ConvertOptions(column_types={name: pa.string() for name in TEXT_COLUMNS},
                                      strings_can_be_null=True, null_values=[""])
        if columns is not None:
            with open(path, newline="", encoding="utf-8", errors="replace") as handle:
                names = next(csv.reader(handle), [])
            options.include_columns = [c for c in names if c in columns]
        return pcsv.read_csv(path, convert_options=options), kind
    if kind == "json":
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip()
        if not head.startswith(b"["):  # one record per line, as JSON Lines
            return _read(path, "jsonl", columns)
        size = path.stat().st_size
        if size > MAX_JSON_ARRAY_BYTES:
            raise LeaderboardInputError(
                f"{path}: a JSON array of {size / 2**20:,.0f} MiB; arrays above {MAX_JSON_ARRAY_BYTES // 2**20} MiB "
                "are refused before parsing (they are parsed whole, at about ten times their size in memory): "
                "write one record per line (JSON Lines), CSV or Parquet")
        records = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise LeaderboardInputError(f"{path}: expected a JSON array of records (objects), one per judgment")
        if not records:
            raise LeaderboardInputError(f"{path}: no judgment rows (an empty JSON array)")
        columns = list(dict.fromkeys(key for record in records for key in record))
        return pa.table({c: pa.array([r.get(c) for r in records]) for c in columns}), kind
    import pyarrow.json as pjson
    return pjson.read_json(path), kind


def table_of_frame(frame) -> pa.Table:
    """An Arrow table of a pandas DataFrame (or an Arrow table as it is)."""
    if isinstance(frame, pa.Table):
        return frame
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise LeaderboardInputError(f"the frame cannot be read column by column: {' '.join(str(exc).split())}") \
            from None
