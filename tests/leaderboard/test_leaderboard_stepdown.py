"""The step-down of the simultaneous rank intervals is the one of Mogstad, Romano, Shaikh and Wilhelm
(2024, section 3.3): the one-sided family {s_i <= s_j : i != j}; at each step the critical value is
the quantile of the max over the hypotheses not yet rejected of (Z_i - Z_j) / se_ij, and once i is
found above j the reverse hypothesis s_j <= s_i stays in the family.

The check is an implementation written here from the paper, over the list of ordered pairs, one
hypothesis at a time, in double precision: on seeded covariances (dense, nearly singular,
independent; with tied scores) it gives the same rejections and critical values as
study.leaderboard.ranks from the same Gaussian draws, and -- with its own 200,000 draws -- the
same rejections where no t statistic lies within the Monte Carlo error of a critical value.  The
variant that dropped both directions of a separated pair differs from it on these cases (the test
can fail)."""
import itertools

import numpy as np
import pytest

from study.leaderboard import rank_intervals


def paper_stepdown(scores, root, level, Z, drop_both=False):
    """(better[i, j] = s_i > s_j declared, critical values per step) by the paper's algorithm."""
    n = len(scores)
    cov = root.T @ root
    hypotheses = [(i, j) for i, j in itertools.permutations(range(n), 2)]  # H: s_i <= s_j
    se = {(i, j): np.sqrt(cov[i, i] + cov[j, j] - 2 * cov[i, j]) for i, j in hypotheses}
    t = {(i, j): (scores[i] - scores[j]) / se[i, j] for i, j in hypotheses}
    left = set(hypotheses)
    rejected, criticals = set(), []
    while left:
        stats = np.column_stack([(Z[:, i] - Z[:, j]) / se[i, j] for i, j in sorted(left)])
        maxima = np.maximum(stats.max(axis=1), 0.0)
        # the order statistic ceil((N - 1) level) (0-based; numpy's 'higher' quantile): one above the
        # empirical inverse CDF at most, on the conservative side
        critical = float(np.sort(maxima)[int(np.ceil(level * (len(maxima) - 1)))])
        criticals.append(critical)
        new = {h for h in left if t[h] > critical}
        if not new:
            break
        rejected |= new
        left -= new
        if drop_both:  # the former variant: the reverse direction left the family too
            left -= {(j, i) for i, j in new}
    better = np.zeros((n, n), dtype=bool)
    for i, j in rejected:
        better[i, j] = True
    return better, criticals


def draws_of(root, draws, seed):
    return np.random.default_rng(np.random.SeedSequence(seed)).standard_normal((draws, root.shape[0])) @ root


def cases():
    rng = np.random.default_rng(20240)
    out = []
    for n, kind in [(6, "dense"), (8, "dense"), (10, "independent"), (7, "near-singular"), (9, "ties")]:
        if kind == "independent":
            root = np.diag(rng.uniform(0.05, 0.15, n))
        elif kind == "near-singular":
            root = rng.normal(size=(n - 1, n)) * 0.05
            root[0] = root[1] * (1 + 1e-6)
        else:
            root = rng.normal(size=(n + 2, n)) * 0.04
        scores = np.sort(rng.normal(0, 0.25, n))[::-1]
        if kind == "ties":
            scores[1] = scores[0]
            scores[5] = scores[4]
        out.append((kind, scores, root))
    return out


@pytest.mark.parametrize("kind, scores, root", cases(), ids=[c[0] for c in cases()])
def test_equals_the_papers_stepdown_on_the_same_draws(kind, scores, root):
    result = rank_intervals(scores, root, draws=4000, seed=7)
    better, criticals = paper_stepdown(scores, root, 0.95, draws_of(root, 4000, 7))
    np.testing.assert_array_equal(result.better, better)
    assert result.steps == len(criticals)
    assert result.critical == pytest.approx(criticals[-1], rel=1e-5)
    n = len(scores)
    np.testing.assert_array_equal(result.lower, 1 + better.sum(axis=0))
    np.testing.assert_array_equal(result.upper, n - better.sum(axis=1))


@pytest.mark.parametrize("kind, scores, root", cases(), ids=[c[0] for c in cases()])
def test_equals_the_papers_stepdown_with_independent_draws(kind, scores, root):
    result = rank_intervals(scores, root, draws=10_000, seed=1)
    Z = draws_of(root, 200_000, 99)  # its own draws: critical values within the Monte Carlo error
    better, criticals = paper_stepdown(scores, root, 0.95, Z)
    cov = root.T @ root
    se = np.sqrt(np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(scores[:, None] - scores[None, :]) / se
    near = np.zeros_like(better)
    for c in criticals:
        near |= np.abs(t - c) < 0.05  # the 10,000-draw critical value's error is about 0.03
    np.testing.assert_array_equal(result.better[~near], better[~near])
    assert abs(result.critical - criticals[-1]) < 0.05


def test_the_reverse_direction_stays_in_the_family():
    """A case where it matters: the former variant (both directions dropped) declares more."""
    found = 0
    for kind, scores, root in cases():
        Z = draws_of(root, 4000, 7)
        paper, paper_c = paper_stepdown(scores, root, 0.95, Z)
        variant, variant_c = paper_stepdown(scores, root, 0.95, Z, drop_both=True)
        assert np.all(variant >= paper)  # the variant's critical values are never larger
        if len(paper_c) > 1 and paper_c[-1] > variant_c[-1]:
            found += 1
            assert np.array_equal(rank_intervals(scores, root, draws=4000, seed=7).better, paper)
    assert found >= 3
