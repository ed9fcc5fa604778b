"""Figures that stay readable with many methods: small multiples by method family, every row's
legend outside its panels, hidden curves named where they hide, the paper's five in their own
colours; ranking diagrams whose layout encodes only the arrows."""
from __future__ import annotations

import numpy as np
import pandas as pd

from study.llm.diagrams import diagram_positions, draw_diagram
from study.results import curves
from study.results.figures import REGRET_PANELS, _curves_figure, _plt

PAPER = ["RB", "ERA", "ETA", "BT-UCB1", "BT-UCB2"]
BASELINES = ["TS", "MaxInP", "CoLSTIM", "RB-UA"]
USER = ["mypkg.pol:A", "mypkg.pol:B", "mypkg.pol:C", "mypkg.pol:D"]
T, T0 = 60, 24


def _stats(methods, seed=0) -> pd.DataFrame:
    """Curve statistics shaped like study.results.figures.trajectory_stats; ERA equals RB up to T0
    (as the construction makes it), every other method differs from t = 1."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, T + 1)
    rows = []
    curves_of = {m: (rng.uniform(0.5, 1.5) / np.sqrt(t), rng.uniform(0.5, 1.5) / t ** 0.3) for m in methods}
    if "ERA" in curves_of and "RB" in curves_of:
        reg, err = curves_of["ERA"]
        reg[:T0], err[:T0] = curves_of["RB"][0][:T0], curves_of["RB"][1][:T0]
    for m, (reg, err) in curves_of.items():
        rows.append(pd.DataFrame({"setting": "A", "method": m, "M": 20, "T0": T0, "T": T, "t": t, "reg_mean": reg,
                                  "reg_se": reg * 0.05, "err_mean": err, "err_se": err * 0.05, "pair_mean": reg * 2,
                                  "pair_se": reg * 0.1, "n": 10}))
    return pd.concat(rows, ignore_index=True)


def test_groups_by_family_and_split_when_large():
    assert curves.groups(PAPER) == [("", PAPER)]  # few methods: one panel
    rows = curves.groups(PAPER + BASELINES + USER)
    assert rows == [("the paper's methods", PAPER), ("dueling-bandit baselines", BASELINES), ("your policies", USER)]
    many = [f"p{k}:X" for k in range(14)]
    rows = curves.groups(PAPER + many)
    assert [len(m) for _, m in rows] == [5, 5, 5, 4]
    assert rows[1][0] == "your policies (1 of 3)"
    assert curves.method_order(["x:Y", "TS", "ERA", "RB"]) == ["RB", "ERA", "TS", "x:Y"]


def test_colours_are_distinct_across_a_figure_and_the_paper_keeps_its_own():
    everyone = PAPER + BASELINES + USER
    seen = {}
    for _, members in curves.groups(everyone):
        for method, style in curves.styles(members, everyone).items():
            seen[method] = (style["color"], style["marker"])
    assert len(set(seen.values())) == len(everyone)
    assert seen["RB"][0] == curves.PAPER_STYLE["RB"]["color"]


def test_hidden_curves_are_found_from_the_data():
    frame = _stats(PAPER)
    hidden = curves.hidden_curves(frame, PAPER)
    assert hidden == {"ERA": ("RB", T0)}  # RB is drawn above ERA (higher zorder)
    assert curves.hidden_label("ERA", hidden["ERA"], T) == "ERA (under RB for t $\\leq$ 24)"
    assert "ERA is RB that keeps exploring after T0" in curves.hidden_note(hidden)
    assert curves.hidden_curves(_stats(["RB", "TS"]), ["RB", "TS"]) == {}


def test_thirteen_methods_make_small_multiples_with_legends_outside():
    plt = _plt()
    frame = _stats(PAPER + BASELINES + USER)
    fig = _curves_figure(plt, frame, REGRET_PANELS, title="13 methods", T0=T0, T=T)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = np.array(fig.axes).reshape(3, 2)
    for row in axes:
        legend = row[-1].get_legend()
        assert legend is not None
        # outside the curves: to the right of the row's last panel
        assert legend.get_window_extent(renderer).x0 >= row[-1].get_window_extent(renderer).x1
        assert all(ax.get_legend() is None for ax in row[:-1])
    labels = [t.get_text() for t in axes[0][-1].get_legend().get_texts()]
    assert labels[0] == "RB (proposed)" and any(label.startswith("ERA (under RB") for label in labels)
    baseline_labels = [t.get_text() for t in axes[1][-1].get_legend().get_texts()]
    assert baseline_labels[0] == "RB (reference)" and len(baseline_labels) == 5
    caption = " ".join(t.get_text() for t in fig.texts)
    assert "T0" in caption and "ridge MLE" in caption and "hidden by construction" in caption
    plt.close(fig)


def test_diagram_layout_encodes_only_the_arrows():
    labels = ["delta", "alpha", "charlie", "bravo"]
    adj = np.zeros((4, 4), dtype=bool)
    adj[0, 2] = True  # delta beats charlie; alpha and bravo are touched by no arrow
    pos = diagram_positions(adj, labels)
    assert pos[0][1] > pos[2][1] >= 0  # ordered: one level apart
    assert pos[1][1] < 0 and pos[3][1] < 0 and pos[1][1] == pos[3][1]  # apart, in the band
    assert pos[1][0] < pos[3][0]  # alphabetical: alpha before bravo
    # no arrow at all: one row, alphabetical, whatever the scores
    pos = diagram_positions(np.zeros((4, 4), dtype=bool), labels)
    assert len({y for _, y in pos.values()}) == 1
    assert [labels[v] for v in sorted(pos, key=lambda v: pos[v][0])] == ["alpha", "bravo", "charlie", "delta"]
    plt = _plt()
    fig, ax = plt.subplots()
    draw_diagram(ax, adj, labels, mean_scores=np.array([3.0, 2.0, 1.0, 0.0]))  # scores do not move anyone
    texts = [t.get_text() for t in ax.texts]
    assert "no supported order" in texts
    plt.close(fig)
