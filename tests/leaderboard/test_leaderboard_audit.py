"""The board audit (``--audit``): each probe stays silent on clean simulated boards and fires on a
board with its defect planted (fixed seeds: a broken probe fails one or the other), and its
statistics equal independent computations.  The rates over many seeds are measured by
``python -m benchmarks.leaderboard_audit rates`` (docs/leaderboard.md#a-board-audit)."""
import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from benchmarks.leaderboard_audit import PROBES, simulate
from study.leaderboard import leaderboard
from study.leaderboard.__main__ import main
from study.leaderboard.audit import MIN_PAIR, audit_board

CLEAN_SEEDS = 20


@pytest.fixture(scope="module")
def clean_audits():
    return [audit_board(leaderboard(simulate("clean", seed), draws=200)) for seed in range(CLEAN_SEEDS)]


@pytest.mark.parametrize("probe", PROBES)
def test_each_probe_is_silent_on_clean_boards(clean_audits, probe):
    fired = [seed for seed, audit in enumerate(clean_audits) if probe in audit.fired]
    assert len(fired) <= 1, f"{probe} fired on clean boards {fired}"  # >= 95% silent
    applicable = [a for a in clean_audits if next(p for p in a.probes if p.name == probe).fired is not None]
    assert len(applicable) == CLEAN_SEEDS  # every probe applies to these boards (silence is not n/a)


@pytest.mark.parametrize("probe", PROBES)
def test_each_probe_fires_on_its_planted_board(probe):
    for seed in range(3):
        audit = audit_board(leaderboard(simulate(probe, seed), draws=200))
        assert probe in audit.fired, (probe, seed, [p.finding for p in audit.probes if p.name == probe])


def _reference_btl(n, a, b, wins_b, m):
    """Reference-coded BTL by IRLS on the dense pair design (model 0's column dropped)."""
    X = np.zeros((len(a), n - 1))
    for k in range(len(a)):
        if b[k]:
            X[k, b[k] - 1] += 1
        if a[k]:
            X[k, a[k] - 1] -= 1
    beta = np.zeros(n - 1)
    for _ in range(100):
        p = 1 / (1 + np.exp(-X @ beta))
        step = np.linalg.solve(X.T @ (X * (m * p * (1 - p))[:, None]), X.T @ (wins_b - m * p))
        beta += step
        if np.abs(step).max() < 1e-13:
            break
    return 1 / (1 + np.exp(-X @ beta))


def test_intransitivity_deviance_equals_an_independent_one():
    frame = simulate("intransitivity", 5)
    probe = next(p for p in audit_board(leaderboard(frame, draws=200)).probes if p.name == "intransitivity")
    decisive = frame[frame.winner != "tie"]
    lo = np.minimum(decisive.model_a, decisive.model_b)
    hi = np.maximum(decisive.model_a, decisive.model_b)
    hi_won = np.where(decisive.winner == "model_a", decisive.model_a == hi, decisive.model_b == hi)
    table = pd.DataFrame({"lo": lo, "hi": hi, "w": hi_won.astype(float)})
    table = table.groupby(["lo", "hi"])["w"].agg(["sum", "size"])
    table = table[table["size"] >= MIN_PAIR].reset_index()
    names = sorted(set(table.lo) | set(table.hi))
    a, b = table.lo.map(names.index).to_numpy(), table.hi.map(names.index).to_numpy()
    w, m = table["sum"].to_numpy(), table["size"].to_numpy().astype(float)
    p = _reference_btl(len(names), a, b, w, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        g2 = 2 * np.sum(np.where(w > 0, w * np.log(w / (m * p)), 0)
                        + np.where(m > w, (m - w) * np.log((m - w) / (m * (1 - p))), 0))
    df = len(table) - len(names) + 1
    assert probe.statistic == pytest.approx(g2, rel=1e-8)
    assert probe.p_value == pytest.approx(chi2.sf(g2, df), rel=1e-6) and probe.values["df"] == df


def test_clustering_statistic_equals_an_independent_one():
    frame = simulate("clustering", 1)
    board = leaderboard(frame, draws=200)
    probe = next(p for p in audit_board(board).probes if p.name == "clustering")
    theta = board.result.theta_d[:, 0]
    idx = {m: k for k, m in enumerate(board.models)}
    a, b = frame.model_a.map(idx).to_numpy(), frame.model_b.map(idx).to_numpy()
    y = frame.winner.map({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}).to_numpy()
    r = y - 1 / (1 + np.exp(-(theta[a] - theta[b])))
    zs = []
    for k in range(len(board.models)):  # per model: the residuals towards it, judge by judge
        rows = (a == k) | (b == k)
        signed = pd.Series(np.where(a[rows] == k, r[rows], -r[rows]))
        groups = signed.groupby(frame.judge.to_numpy()[rows])
        s, r2, r4 = groups.sum(), groups.apply(lambda v: (v ** 2).sum()), groups.apply(lambda v: (v ** 4).sum())
        T = (s ** 2 - r2).sum()
        zs.append(T / np.sqrt(2 * (r2 ** 2 - r4).sum()))
    assert probe.statistic == pytest.approx(max(zs), rel=1e-9)


def test_the_one_step_influence_tracks_the_refit():
    probe = next(p for p in audit_board(leaderboard(simulate("influence", 2), draws=200)).probes
                 if p.name == "influence")
    one_step, refit = probe.values["largest_influence_se"], probe.values["refitted_influence_se"]
    assert probe.fired and refit == pytest.approx(one_step, rel=0.5) and one_step > 0.5


def test_the_command_writes_the_audit(tmp_path, capsys):
    path = tmp_path / "votes.parquet"
    simulate("position", 3).to_parquet(path)
    code = main([str(path), "--out", str(tmp_path / "b"), "--audit", "--no-figures"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "## Board audit" in out and "| position | Does the side shown first win more? | **FIRES** |" in out
    data = json.loads((tmp_path / "b" / "audit.json").read_text())
    assert [p["name"] for p in data["audit"]["probes"]] == list(PROBES) and "position" in data["audit"]["fired"]
    assert "## Board audit" in (tmp_path / "b" / "leaderboard.md").read_text()
    board_json = json.loads((tmp_path / "b" / "leaderboard.json").read_text())
    assert board_json["audit"] == data["audit"] and len(board_json["models"]) == 8


def test_the_audit_of_a_contextual_board_is_refused_in_one_line(tmp_path, capsys):
    frame = simulate("clean", 1)
    frame["cat"] = np.where(np.arange(len(frame)) % 2, "x", "y")
    path = tmp_path / "votes.csv"
    frame.to_csv(path, index=False)
    code = main([str(path), "--out", str(tmp_path / "b"), "--audit", "--category", "cat", "--no-figures"])
    out, err = capsys.readouterr()
    assert code == 2 and "the audit examines the plain board" in err and len(err.strip().splitlines()) == 1


def test_ties_statistic_and_davidson_fit_equal_independent_ones():
    from scipy.optimize import minimize
    frame = simulate("ties", 4)
    board = leaderboard(frame, draws=200)
    probe = next(p for p in audit_board(board).probes if p.name == "ties")
    models = board.models
    n = len(models)
    theta = board.result.theta_d[:, 0]
    a = frame.model_a.map(models.index).to_numpy()
    b = frame.model_b.map(models.index).to_numpy()
    tie = (frame.winner == "tie").to_numpy(float)
    # per vote, logistic regression of the tie indicator: (1, d, d^2) against (1, d, d^2, one-hot a + one-hot b)
    d = np.abs(theta[a] - theta[b])
    base = np.column_stack([np.ones_like(d), d, d * d])
    onehot = np.zeros((len(d), n))
    onehot[np.arange(len(d)), a] += 1
    onehot[np.arange(len(d)), b] += 1
    full = np.hstack([base, onehot[:, 1:]])  # reference coding (model 0 dropped): the same span

    def best(X):
        nll = lambda w: float(np.sum(np.logaddexp(0, X @ w)) - tie @ (X @ w))
        grad = lambda w: X.T @ (1 / (1 + np.exp(-(X @ w))) - tie)
        return -minimize(nll, np.zeros(X.shape[1]), jac=grad, method="BFGS", options={"gtol": 1e-9}).fun
    assert probe.statistic == pytest.approx(2 * (best(full) - best(base)), rel=1e-5)
    # Davidson's model per vote, reference-coded: P(a) = e^ta / D, P(b) = e^tb / D, P(tie) = nu e^((ta+tb)/2) / D
    won_a = (frame.winner == "model_a").to_numpy(float)
    won_b = (frame.winner == "model_b").to_numpy(float)

    def davidson(w):
        t = np.concatenate([[0.0], w[:n - 1]])
        ua, ub, ut = t[a], t[b], w[n - 1] + 0.5 * (t[a] + t[b])
        log_d = np.logaddexp(np.logaddexp(ua, ub), ut)
        return -float(won_a @ ua + won_b @ ub + tie @ ut - log_d.sum())
    fitted = minimize(davidson, np.zeros(n), method="BFGS", options={"gtol": 1e-8})
    assert probe.values["davidson_nu"] == pytest.approx(np.exp(fitted.x[-1]), rel=1e-4)
