"""benchmarks/stopping.py on a tiny case: the tie context ties the two leaders exactly and puts them
ahead of the rest; one replication gives a record per context and rule whose verdicts are the
stopping rule's; the table is built from the records."""
import numpy as np
import pandas as pd

from benchmarks import stopping
from study.llm.data import load_contexts
from study.llm.environment import LLMReplay
from study.simulation.settings import SETTINGS


def test_tie_context_ties_the_two_leaders_ahead_of_the_rest():
    cases = [(SETTINGS[name].theta_star_centred, np.ones(SETTINGS[name].dim), None) for name in ("A", "B")]
    env = LLMReplay(0, T=1, M=1)
    cases.append((env.theta_star - env.theta_star.mean(axis=0), load_contexts()[1].mean(axis=0), range(1, 10)))
    for truth, x0, free in cases:
        x = stopping.tie_context(truth, x0, free)
        score = np.sort(truth @ x)[::-1]
        assert abs(score[0] - score[1]) < 1e-12 and score[1] - score[2] >= 0.5 - 1e-9
        if free is not None:
            assert x[0] == x0[0]  # the intercept kept
    np.testing.assert_allclose(stopping.tie_context(*cases[0][:2]), [1.15] * 4 + [0.9] * 6, atol=1e-9)


def test_one_replication_and_the_table():
    records = stopping.run_one(("A", 0))
    frame = pd.DataFrame(records)
    assert len(frame) == 3 * 3 and set(frame.rule) == {"CI", "CS", "CI@T"}
    assert frame[frame.target == "mean"].tie.all() and frame[frame.target == "tie"].tie.all()
    assert not frame[frame.target == "first"].tie.any()
    decided = frame.set_index(["target", "rule"])["decided"]
    for target in ("mean", "first", "tie"):  # confidence sequences are wider: they never decide first
        if decided[(target, "CS")]:
            assert decided[(target, "CI")]
            assert frame.query("target == @target and rule == 'CI'").t.iloc[0] <= \
                frame.query("target == @target and rule == 'CS'").t.iloc[0]
    assert (frame.wrong == (frame.decided & (frame.tie | (frame.named != frame.best)))).all()
    text = stopping.to_markdown(stopping.summarise(frame))
    assert text.count("\n") == 2 + 9 and "(all tied)" in text and "(two leaders tied)" in text
