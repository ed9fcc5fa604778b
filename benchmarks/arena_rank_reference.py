"""LMArena's own ratings and sandwich standard errors on the committed Chatbot Arena votes, for
tests/core/test_sandwich.py (which compares them with ``study.debias(..., se="sandwich")``).

arena-rank is NOT a dependency of the project.  This script runs once, in a scratch virtual
environment outside the repository, and its output is committed (tests/data/arena_rank_sandwich.csv):

    python3 -m venv /tmp/arena-venv
    /tmp/arena-venv/bin/pip install arena-rank==0.1.1
    /tmp/arena-venv/bin/python benchmarks/arena_rank_reference.py --out tests/data/arena_rank_sandwich.csv

It reads study/llm/data/arena.npz with numpy only (the project need not be installed there),
expands the vote counts into one row per vote (1,670,000-odd rows: model_a = the pair's first
model, model_b = its second; winner model_a / model_b / tie / both_bad, arena-rank's own outcome
map: a tie of either kind is 0.5), builds arena-rank's ``PairDataset.from_pandas`` (unweighted)
and calls ``BradleyTerry(n).compute_ratings_and_cis(dataset, ci_method="sandwich")``.  Ratings
and standard errors are written on the natural (logit) scale: arena-rank's scaled values divided by
alpha = 400 / ln 10 (its ratings are r = theta, its rating difference r_a - r_b is the logit of a
winning).  Its Hessian carries a ridge of 1e-5 x (number of votes) on the diagonal
(``hessian_reg`` x total battles, arena_rank/models/bradley_terry.py, ``compute_ratings_and_cis``).
"""
from __future__ import annotations

import argparse
import hashlib
import platform
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

ARENA = Path(__file__).resolve().parents[1] / "study" / "llm" / "data" / "arena.npz"
OUTCOMES = ("model_a", "model_b", "tie", "both_bad")  # the four count columns of arena.npz


def votes_frame(path: Path = ARENA) -> tuple[pd.DataFrame, list]:
    with np.load(path, allow_pickle=False) as z:
        models = [str(x) for x in z["models"]]
        pairs, counts = z["pairs"].astype(np.int64), z["counts"].astype(np.int64)
    first = np.repeat(np.repeat(pairs[:, 0], 4), counts.ravel())
    second = np.repeat(np.repeat(pairs[:, 1], 4), counts.ravel())
    winner = np.repeat(np.tile(np.array(OUTCOMES), len(pairs)), counts.ravel())
    names = np.array(models, dtype=object)
    return pd.DataFrame({"model_a": names[first], "model_b": names[second], "winner": winner}), models


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.utils.data_utils import PairDataset

    frame, models = votes_frame()
    dataset = PairDataset.from_pandas(frame)
    model = BradleyTerry(n_competitors=len(dataset.competitors))
    result = model.compute_ratings_and_cis(dataset, ci_method="sandwich")
    alpha = model.alpha
    ratings = (np.asarray(result["ratings"]) - model.init_rating) / alpha
    se = np.sqrt(np.asarray(result["variances"])) / alpha
    out = pd.DataFrame({"model": list(result["competitors"]), "rating": ratings, "se": se})
    if sorted(out.model) != sorted(models):
        raise SystemExit("arena-rank's competitors differ from the committed models")
    header = [
        "# LMArena arena-rank BradleyTerry sandwich ratings and standard errors (logit scale) on the committed",
        "# Chatbot Arena votes; produced by benchmarks/arena_rank_reference.py (see its docstring for the command).",
        f"# votes: {len(frame)}; models: {len(models)}; hessian_reg: {model.hessian_reg} x votes",
        f"# arena.npz sha256: {hashlib.sha256(ARENA.read_bytes()).hexdigest()}",
        f"# arena-rank {metadata.version('arena-rank')}, jax {metadata.version('jax')}, numpy {np.__version__}, "
        f"pandas {pd.__version__}, python {platform.python_version()}",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(header) + "\n" + out.to_csv(index=False, float_format="%.17g"))
    print(f"wrote {args.out} ({len(out)} models)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
