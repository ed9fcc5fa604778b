"""The paper's application "Applications to Language Model Ranking", on data that installs offline.

* :mod:`study.llm.data`         loaders of the committed derived data (questions, contexts, pool, arena).
* :mod:`study.llm.environment`  replay environments: :class:`LLMReplay` (five LLMs, 100 MMLU anatomy
  questions, GENERATED judgments), :class:`ArenaReplay` (129 models, real Chatbot Arena votes).
* :mod:`study.llm.byo`          bring your own judgments (CSV/Parquet) into the same replay.
* :mod:`study.llm.diagrams`     ranking diagrams (point and uncertainty-aware), transitive reduction.
* :mod:`study.llm.prepare`      ``python -m study.llm.prepare`` regenerates the derived data (optional extra
  ``llm-prepare``).
"""
from .data import (FIVE_MODELS, MODEL_LABELS, ArenaVotes, JudgmentPool, load_arena, load_contexts,
                   load_judgment_pool, load_meta, load_questions)
from .environment import ARENA_M, ARENA_T, LLM_M, LLM_T, ArenaReplay, JudgmentReplay, LLMReplay

__all__ = ["FIVE_MODELS", "MODEL_LABELS", "ArenaVotes", "JudgmentPool", "load_arena", "load_contexts",
           "load_judgment_pool", "load_meta", "load_questions", "ARENA_M", "ARENA_T", "LLM_M", "LLM_T",
           "ArenaReplay", "JudgmentReplay", "LLMReplay"]
