"""A pool of prompts with responses: read from the leaderboard's formats, contexts as the leaderboard
takes them, models without a response never paired, thin prompts skipped and counted, bad files
refused in one line; the next-prompt rule (uniform, seeded, never the same prompt twice to a judge,
a stated share re-served to a second judge)."""
import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from study.online.service.pool import Assigner, read_pool


def write(frame, path):
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        frame.to_parquet(path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    return path


def files(tmp_path, suffix=".jsonl", prompts=6, models=("m1", "m2", "m3"), missing=()):
    p = pd.DataFrame({"question_id": [f"q{k}" for k in range(prompts)],
                      "prompt": [f"What is {k} + {k}?" for k in range(prompts)],
                      "category": ["math", "code"] * (prompts // 2),
                      "length": np.arange(prompts, dtype=float)})
    r = pd.DataFrame([{"question_id": f"q{k}", "model": m, "response": f"{m} says {2 * k}"}
                      for k in range(prompts) for m in models if (f"q{k}", m) not in missing])
    return write(p, tmp_path / f"prompts{suffix}"), write(r, tmp_path / f"responses{suffix}")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_pool_reads_every_format_and_pairs_only_models_with_responses(tmp_path, suffix):
    missing = {("q1", "m3"), ("q2", "m2"), ("q2", "m3"), ("q4", "m1"), ("q4", "m2"), ("q4", "m3")}
    pool = read_pool(*files(tmp_path, suffix, missing=missing))
    assert pool.question_ids == ["q0", "q1", "q3", "q5"] and pool.skipped == {"q2": 1, "q4": 0}
    assert pool.available("q1") == {"m1", "m2"} and pool.available("q0") == {"m1", "m2", "m3"}
    assert pool.models == ["m1", "m2", "m3"] and pool.response("q3", "m2") == "m2 says 6"
    assert pool.contexts.shape == (4, 1) and pool.context_names == ["1"]
    assert pool.summary().startswith("4 prompts with responses of 3 models (d = 1); 2 prompts")


def test_contexts_are_built_the_leaderboards_ways(tmp_path):
    prompts, responses = files(tmp_path)
    by_category = read_pool(prompts, responses, category="category")
    assert by_category.context_names == ["category=code", "category=math"]
    assert by_category.context("q0").tolist() == [0.0, 1.0] and by_category.context("q1").tolist() == [1.0, 0.0]
    assert by_category.categories["q1"] == "code"
    both = read_pool(prompts, responses, category="category", features=["length"])
    assert both.context("q3").tolist() == [1.0, 0.0, 3.0]
    plain = read_pool(prompts, responses, features=["length"])
    assert plain.context("q5").tolist() == [1.0, 5.0]

    def embedder(texts):  # stands in for all-MiniLM-L6-v2: distinct texts, distinct vectors
        rng = np.random.default_rng(0)
        return rng.normal(size=(len(texts), 8)) + np.arange(len(texts))[:, None]

    embedded = read_pool(prompts, responses, embed="prompt", dim=3, embedder=embedder)
    assert embedded.contexts.shape == (6, 3) and np.all(embedded.contexts[:, 0] == 1.0)
    assert len({tuple(x) for x in embedded.contexts}) == 6


@pytest.mark.parametrize("change, where, message", [
    ("prompts", lambda p, r: p.assign(question_id=["q0", "q1", "q2", "q0", "q4", "q5"]),
     "prompts.csv: row 4 (file line 5), column 'question_id': question 'q0' again (first at row 1)"),
    ("prompts", lambda p, r: p.assign(prompt=["x", "", "x", "x", "x", "x"]),
     "prompts.csv: row 2 (file line 3), column 'prompt': empty value"),
    ("prompts", lambda p, r: p.drop(columns="prompt"), "prompts.csv: no column 'prompt'"),
    ("prompts", lambda p, r: p.assign(length=[0.0, np.nan, 1, 2, 3, 4]),
     "prompts.csv: row 2 (file line 3), column 'length': missing or NaN context value"),
    ("responses", lambda p, r: r.assign(question_id=r.question_id.where(r.index != 4, "q99")),
     "responses.csv: row 5 (file line 6), column 'question_id': question 'q99' is not in the prompts file"),
    ("responses", lambda p, r: pd.concat([r, r.iloc[[2]]]),
     "responses.csv: row 19 (file line 20), column 'model': a second response of 'm3' to question 'q0' (first at "
     "row 3)"),
    ("responses", lambda p, r: r.assign(response=r.response.where(r.index != 0, "")),
     "responses.csv: row 1 (file line 2), column 'response': empty value"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, change, where, message):
    prompts, responses = files(tmp_path, ".csv")
    p, r = pd.read_csv(prompts), pd.read_csv(responses)
    if change == "prompts":
        write(where(p, r), prompts)
    else:
        write(where(p, r), responses)
    with pytest.raises(ValueError) as info:
        read_pool(prompts, responses, features=["length"] if "length" in message else None)
    text = str(info.value)
    assert "\n" not in text and message in text, text


def test_refusals_of_whole_files(tmp_path):
    prompts, responses = files(tmp_path, ".csv")
    with pytest.raises(ValueError, match="no prompt has responses of two models or more"):
        read_pool(prompts, write(pd.DataFrame({"question_id": ["q0"], "model": ["m1"], "response": ["hi"]}),
                                 tmp_path / "one.csv"))
    with pytest.raises(ValueError, match="model 'm3' is not one of the ranker's items"):
        read_pool(prompts, responses, models=["m1", "m2"])
    with pytest.raises(ValueError, match="no such file"):
        read_pool(tmp_path / "nope.csv", responses)


def test_the_next_prompt_is_uniform_new_and_never_repeated(tmp_path):
    pool = read_pool(*files(tmp_path, prompts=10))
    counts = Counter()
    for seed in range(400):
        assigner = Assigner(pool, overlap=0.0, seed=seed)
        counts[assigner.next("ann").question_id] += 1
    assert set(counts) == set(pool.question_ids)
    # chi-square goodness of fit of the first prompt, 9 degrees of freedom: 27.9 is its 0.999 quantile
    assert sum((c - 40) ** 2 / 40 for c in counts.values()) < 27.9
    assigner = Assigner(pool, overlap=0.0, seed=1)
    shown = []
    while (nxt := assigner.next("ann")) is not None:
        assigner.record("ann", nxt.question_id, ("m1", "m2"))
        shown.append(nxt.question_id)
    assert sorted(shown) == sorted(pool.question_ids)  # each once, then none
    with pytest.raises(ValueError, match="served prompt 'q0' before"):
        assigner.record("ann", "q0", ("m2", "m3"))


def test_a_stated_share_is_re_served_to_a_second_judge(tmp_path):
    pool = read_pool(*files(tmp_path, prompts=400))
    assigner = Assigner(pool, overlap=0.1, seed=3)
    rng = np.random.default_rng(0)
    served = {judge: set() for judge in "abcde"}
    overlaps = total = 0
    for step in range(1000):
        judge = "abcde"[step % 5]
        nxt = assigner.next(judge)
        pair = nxt.pair or tuple(sorted(rng.choice(["m1", "m2", "m3"], 2, replace=False)))
        assert (nxt.question_id, frozenset(pair)) not in served[judge]
        if nxt.overlap:
            assert len(assigner.judges_of(nxt.question_id, pair)) == 1
        assigner.record(judge, nxt.question_id, pair)
        served[judge].add((nxt.question_id, frozenset(pair)))
        overlaps += nxt.overlap
        total += 1
    # 1,000 Bernoulli(0.1) draws (a candidate is always there after the first few): 100 +- 3 SE
    assert 70 <= overlaps <= 130
    twice = {(q, p) for s in served.values() for q, p in s if len(assigner.judges_of(q, p)) >= 2}
    assert len(twice) >= overlaps  # (a prompt drawn anew may meet the same pair by chance too)


def test_a_pair_without_responses_is_refused(tmp_path):
    pool = read_pool(*files(tmp_path, missing={("q0", "m3")}))
    with pytest.raises(ValueError, match=r"'q0': no response of \['m3'\]"):
        Assigner(pool).record("ann", "q0", ("m1", "m3"))
