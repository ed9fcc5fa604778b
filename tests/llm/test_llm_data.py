"""LLM application: committed derived data, loaders and the replay environments."""
import numpy as np
import pytest

from study.llm import (FIVE_MODELS, ArenaReplay, JudgmentReplay, LLMReplay, load_arena, load_contexts,
                       load_judgment_pool, load_meta, load_questions)
from study.simulation.graph import is_connected


def test_questions_are_the_first_100_anatomy_rows():
    q = load_questions()
    assert len(q) == 100
    assert q.question_id.tolist() == [f"anatomy-{k:03d}" for k in range(100)]
    assert q.source_line.is_monotonic_increasing and q.source_line.is_unique
    assert q.question.iloc[0].startswith("A lesion causing compression of the facial nerve")
    assert set(q.correct_answer) <= set("ABCD")
    for col in ("answer_a", "answer_b", "answer_c", "answer_d"):
        assert (q[col].str.len() > 0).all()


def test_contexts_have_a_constant_and_nine_scaled_components():
    ids, X = load_contexts()
    assert X.shape == (100, 10) and len(ids) == 100
    assert np.allclose(X[:, 0], 1.0)
    assert np.allclose(X[:, 1:].mean(axis=0), 0.0, atol=1e-8)
    assert np.isclose((X[:, 1:] ** 2).sum(axis=1).mean(), 1.0, rtol=1e-6)
    assert np.linalg.matrix_rank(X.T @ X) == 10


def test_judgment_pool_has_the_five_models_and_all_pairs():
    pool = load_judgment_pool()
    assert pool.models == FIVE_MODELS
    assert pool.labels == ["LLaMA-1", "LLaMA-2", "Alpaca", "GPT-3.5", "GPT-4o mini"]
    assert pool.pairs.shape == (10, 2)
    assert pool.outcomes.shape[:2] == (100, 10) and pool.outcomes.shape[2] >= 1
    assert set(np.unique(pool.outcomes)) <= {0, 1}
    assert np.allclose(pool.theta_star.sum(axis=0), 0.0, atol=1e-8)
    # the strengths (constant coordinate) keep the arena order
    order = np.argsort(-pool.theta_star[:, 0])
    assert [pool.labels[k] for k in order] == ["GPT-4o mini", "GPT-3.5", "LLaMA-2", "Alpaca", "LLaMA-1"]
    meta = load_meta()
    assert meta["generation"]["note"].startswith("GENERATED")
    assert meta["generation"]["judgments_per_cell"] == pool.outcomes.shape[2]


def test_arena_votes():
    arena = load_arena()
    assert len(arena.models) == 129 and len(arena.pairs) == 3460
    assert arena.n_votes == 1_670_250
    assert is_connected(arena.pairs, 129)
    for m in FIVE_MODELS:
        assert m in arena.models
    theta = dict(zip(arena.models, arena.theta_star))
    assert theta["gpt-4o-mini-2024-07-18"] > theta["gpt-3.5-turbo-0613"] > theta["llama-13b"]


def test_llm_replay_protocol_and_seeding():
    env = LLMReplay(3, T=200)
    assert (env.n_items, env.dim, env.T, env.M) == (5, 10, 200, 1)
    assert env.edges.shape == (10, 2) and env.contexts.shape == (200, 10)
    assert env.theta0.shape == (5, 10) and np.allclose(env.theta_star.sum(axis=0), 0)
    assert np.allclose(env.contexts, env.question_contexts[env.questions])
    again = LLMReplay(np.random.SeedSequence(3), T=200)
    assert np.array_equal(again.questions, env.questions) and np.array_equal(again.theta0, env.theta0)
    assert [env.compare(t, 0, 4) for t in range(1, 50)] == [again.compare(t, 0, 4) for t in range(1, 50)]
    other = LLMReplay(4, T=200)
    assert not np.array_equal(other.questions, env.questions)
    with pytest.raises(ValueError, match="seed"):
        LLMReplay(-1)
    with pytest.raises(ValueError, match="t must lie"):
        env.compare(201, 0, 1)


def test_llm_replay_draws_only_recorded_outcomes():
    env = LLMReplay(7, T=3000)
    pool = load_judgment_pool()
    second_won = pool.outcomes.sum(axis=2)  # (Q, E)
    k = pool.outcomes.shape[2]
    rng = np.random.default_rng(0)
    for t in range(1, env.T + 1):
        e = rng.integers(10)
        lo, hi = pool.pairs[e]
        a, b = (lo, hi) if rng.random() < 0.5 else (hi, lo)
        won_by_b = env.compare(t, a, b)
        hi_won = won_by_b if b == hi else 1 - won_by_b
        c = second_won[env.questions[t - 1], e]
        assert hi_won in (0.0, 1.0)
        assert (hi_won == 1.0 and c > 0) or (hi_won == 0.0 and c < k)


def test_replay_on_hand_made_counts():
    X = np.array([[1.0, 0.0], [1.0, 1.0]])
    edges = np.array([[0, 1], [1, 2]])
    counts = np.zeros((2, 2, 3), dtype=int)
    counts[0, 0] = [0, 5, 0]  # question 0, pair (0, 1): item 1 always won
    counts[1, 0] = [0, 0, 2]  # question 1: only ties
    counts[:, 1] = [3, 0, 0]  # pair (1, 2): item 1 always won
    env = JudgmentReplay(X, edges, counts, np.zeros((3, 2)), 11, T=400, M=4)
    for t in range(1, env.T + 1):
        q = env.questions[t - 1]
        assert env.compare(t, 0, 1) == (4.0 if q == 0 else 2.0)
        assert env.compare(t, 1, 0) == (0.0 if q == 0 else 2.0)
        assert env.compare(t, 1, 2) == 0.0 and env.compare(t, 2, 1) == 4.0
    with pytest.raises(ValueError, match="not an edge"):
        env.compare(1, 0, 2)
    with pytest.raises(ValueError, match="not connected"):
        JudgmentReplay(X, np.array([[0, 1]]), counts[:, :1], np.zeros((3, 2)), 0, T=5)


def test_replay_falls_back_to_the_pair_when_a_question_has_no_judgment():
    X = np.array([[1.0], [1.0]])
    counts = np.zeros((2, 1, 3), dtype=int)
    counts[0, 0] = [0, 1, 0]
    env = JudgmentReplay(X, np.array([[0, 1]]), counts, np.zeros((2, 1)), 5, T=100)
    assert all(env.compare(t, 0, 1) == 1.0 for t in range(1, 101))
    assert env.fallback_draws == int(np.sum(env.questions == 1)) > 0


def test_arena_replay():
    env = ArenaReplay(1, T=500, M=10)
    assert (env.n_items, env.dim, env.M) == (129, 1, 10)
    assert env.edges.shape == (3460, 2) and np.all(env.contexts == 1.0)
    arena = load_arena()
    a, b = arena.pairs[0]
    wins = [env.compare(t, a, b) for t in range(1, 501)]
    assert all(0 <= w <= 10 and 2 * w == int(2 * w) for w in wins)
    c = arena.counts[0]
    expected = 10 * (c[1] + 0.5 * (c[2] + c[3])) / c.sum()
    assert abs(np.mean(wins) - expected) < 0.5


def test_core_runs_the_llm_replay():
    study = pytest.importorskip("study")
    if not hasattr(study, "run_environment"):
        pytest.skip("bandit core not available")
    env = LLMReplay(0, T=30)
    setting = study.SETTINGS["A"].replace(name="llm", n_items=5, dim=10, T=30, T0=15, M=1, truth=env.theta_star,
                                          init_mean=0.0, edges=env.edges, ci_every=0)
    result = study.run_environment(env, "RB", setting)
    assert len(result.trajectory["regret"]) == 30
    assert np.all(result.trajectory["regret"] >= -1e-12)


def test_engine_hook_replicates_llm_and_byo(tmp_path):
    study = pytest.importorskip("study")
    if not hasattr(study, "run_environment"):
        pytest.skip("bandit core not available")
    from study.llm.runs import byo_setting, llm_setting, replicate
    setting = llm_setting(T=40, T0=20)
    assert (setting.n_items, setting.dim, setting.T0, setting.M) == (5, 10, 20, 1)
    first, second = replicate(setting, "ERA", 9), replicate(setting, "ERA", 9)
    assert np.array_equal(first.trajectory["regret"], second.trajectory["regret"])
    rows = ["question_id,model_a,model_b,winner,context"]
    for k, (a, b, w) in enumerate([("x", "y", "a"), ("y", "x", "a"), ("y", "z", "tie"), ("z", "x", "b"),
                                   ("x", "z", "b"), ("z", "y", "a")]):
        rows.append(f'q{k % 2},{a},{b},{w},"[1.0, {0.3 if k % 2 else -0.3}]"')
    path = tmp_path / "j.csv"
    path.write_text("\n".join(rows) + "\n")
    byo = byo_setting(path, T=15, T0=5)
    result = replicate(byo, "RB", 1)
    assert len(result.trajectory["t"]) == 15 and byo.n_items == 3
