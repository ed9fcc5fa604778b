"""A board audit: seven probes of what can make a published board say more than its votes do, each a
stated test with a level ``ALPHA`` (or a stated rule), its false-alarm rate measured on clean
simulated boards and its power on boards with the defect planted (``benchmarks/leaderboard_audit.py``;
``tests/leaderboard/test_leaderboard_audit.py``).

1. **position** -- does the side shown first win more?  The BTL fit with a position term (model_a's
   side, :mod:`.style`), Wald z of the term; fires when it rejects at p < ALPHA with the per-vote
   sandwich SE and, where the board clusters by judge, with the judge-clustered SE too (an
   intersection of two tests: its size is at most either's; the clustered test alone over-rejects
   where a few judges cast most of the votes, the per-vote one where judges have a taste).
2. **ties** -- is a tie evidence of closeness only, as both conventions assume?  Per pair, the ties
   are Binomial(m, q) with logit q = a + b d + c d^2 (d = |theta_i - theta_j|): the Davidson model's
   tie rate is a function of d alone.  Likelihood-ratio test against per-model tie propensities
   (+ eta_i + eta_j), chi-square with n - 1 df; fires at p < ALPHA.  Beside it, the boards under
   the conventions compared: ties half a win (LMArena), dropped, and Davidson's (1970) tie model
   (Spearman correlation with the half-win board, the largest rank change).
3. **intransitivity** -- do the pairs' decisive votes fit BTL?  Deviance G^2 of the BTL fit against
   the saturated pair model, on the decisive votes (under Davidson's model too they follow BTL) of
   pairs with at least ``MIN_PAIR`` of them; chi-square with (pairs - models + 1) df; fires at
   p < ALPHA.  Assumes independent votes (see probe 6).
4. **connectivity** -- is the board held together by a few votes?  Components of the graph of
   pairs with at least ``MIN_PAIR`` votes (the board itself refuses a disconnected graph); fires
   when there are more than one (a rule: no false alarms by chance on well-covered boards).
5. **coverage** -- are some models judged far less than others?  Fires when the least-judged
   model has fewer than 1 / ``COVERAGE_RATIO`` of the most-judged one's judgments (a rule).
6. **clustering** -- are a judge's votes correlated?  Per model, the within-judge cross products
   of the vote residuals T = sum_g (s_g^2 - sum_k r_k^2) (zero mean when votes are independent) over
   the plug-in SD of that U-statistic, sqrt(2 sum_g ((sum_k r_k^2)^2 - sum_k r_k^4)); fires when
   the largest z exceeds the one-sided ALPHA / n quantile (Bonferroni).  Reported with the design
   effect per model, sum_g s_g^2 / sum_k r_k^2 (the judge-clustered over the per-vote variance of
   its score equation), and where the board clusters by judge, (clustered SE / model SE)^2 per model.
7. **influence** -- does one judge move the board?  For the ``TOP_JUDGES`` judges with most votes:
   the leave-one-judge-out change of every score by one Newton step, -Q K^{-1} Q' s_g (exact to first
   order; the largest is refitted exactly), relative to the score's SE; and the consistency of the
   judge's votes with the rest, s_g' V_g^+ s_g ~ chi-square (V_g the model variance of s_g).  Fires
   when some judge moves a score by at least ``INFLUENCE_SE`` SE *and* its votes are inconsistent
   at ALPHA / (judges tested) (Bonferroni).

The probes examine the plain board (no contexts) from the votes under the board's tie rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.linalg import solve_triangular
from scipy.optimize import minimize
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, log_expit
from scipy.stats import chi2, norm, spearmanr

from ..core.batch import Rows, fit
from ..core.contrasts import basis, to_reduced
from ..core.inference import debias_rows
from .files import LeaderboardInputError
from .style import StyleFeatures, fit_style

ALPHA = 0.01
MIN_PAIR = 10
COVERAGE_RATIO = 3.0
TOP_JUDGES = 500
INFLUENCE_SE = 0.5
DENSE_MAX = 20_000_000  # entries of the ties probe's dense pair design (160 MB)


@dataclass
class Probe:
    """One probe's result: ``fired`` (None: not applicable), its test, statistic and p-value,
    a one-line ``finding`` and the numbers behind it (``values``)."""

    name: str
    question: str
    test: str
    fired: bool | None
    statistic: float | None = None
    p_value: float | None = None
    finding: str = ""
    values: dict = field(default_factory=dict)


@dataclass
class Audit:
    source: str
    probes: list
    alpha: float = ALPHA

    @property
    def fired(self) -> list:
        return [p.name for p in self.probes if p.fired]


class _Votes:
    """The votes by pair (lo < hi): decisive wins of each side, ties, comparisons; the plain fit."""

    def __init__(self, battles):
        n = battles.n_models
        self.n, self.models = n, battles.models
        i, j = battles.i, battles.j
        self.lo, self.hi = np.minimum(i, j), np.maximum(i, j)
        key = self.lo.astype(np.int64) * n + self.hi
        keys, self.edge = np.unique(key, return_inverse=True)
        self.edge = self.edge.ravel()
        E = len(keys)
        self.a, self.b = (keys // n).astype(np.intp), (keys % n).astype(np.intp)
        hi_wins = np.where(i > j, battles.m - battles.wins - battles.ties, battles.wins)
        lo_wins = battles.m - hi_wins - battles.ties
        self.hi_wins = np.bincount(self.edge, hi_wins, E)
        self.lo_wins = np.bincount(self.edge, lo_wins, E)
        self.ties = np.bincount(self.edge, battles.ties, E)
        self.m = np.bincount(self.edge, battles.m, E)


def _btl(n, a, b, hi_score, m, ties=None):
    """The plain BTL fit (sum-zero theta) of pair counts, or None where it does not exist."""
    ties = np.zeros_like(m) if ties is None else ties
    keep = m > 0
    rows = Rows(a[keep], b[keep], np.ones((int(keep.sum()), 1)), hi_score[keep] - ties[keep] / 2, ties[keep],
                m[keep], n)
    fitted = fit(rows)
    if fitted is None or not fitted.converged:
        return None
    return fitted.theta[:, 0]


def _components(n, a, b, keep):
    graph = sparse.coo_matrix((np.ones(int(keep.sum())), (a[keep], b[keep])), shape=(n, n))
    return connected_components(graph, directed=False)


def _names(models, items, limit=4):
    shown = [f"`{models[k]}`" for k in items[:limit]]
    return ", ".join(shown) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def position_probe(board) -> Probe:
    b = board.battles
    kinds = ["sandwich"] + (["cluster"] if board.se_method == "cluster" else [])
    question, test = ("Does the side shown first win more?",
                      "Wald z of a position term (model_a's side) in the BTL fit; fires when it rejects at p < "
                      f"{ALPHA:g} with the per-vote sandwich SE" + (" and with the judge-clustered SE (the clustered "
                      "one alone over-rejects where a few judges cast most votes)" if len(kinds) == 2 else ""))
    features = StyleFeatures(raw=np.zeros((b.rows, 0)), names=[], side=np.ones(b.rows), position="model_a")
    tests = []
    for kind in kinds:
        try:
            fitted = fit_style(b, features, se=kind)
        except LeaderboardInputError as exc:
            return Probe("position", question, test, None, finding=f"not identified: {str(exc).split(': ', 1)[-1]}")
        delta, se = float(fitted.coef[-1]), float(fitted.se[-1])
        tests.append((float(2 * norm.sf(abs(delta / se))), delta / se, se))
    p, z, se = max(tests)  # the test rejects when both do: its p-value is the larger
    share = float(expit(delta))
    return Probe("position", question, test, p < ALPHA, z, p,
                 f"model_a's side: {delta:+.3f} log-odds ({delta - 1.96 * se:+.3f} to {delta + 1.96 * se:+.3f}); "
                 f"between equal models it wins {share:.1%} of the time",
                 {"coefficient": delta, "se": se, "win_share_between_equals": share,
                  "se_by_kind": {kind: t[2] for kind, t in zip(kinds, tests)}})


def _binomial_fit(X, k, m):
    """Binomial logistic MLE (successes k of m) by Newton with step halving: (beta, log-likelihood)."""
    beta = np.zeros(X.shape[1])

    def loglik(beta):
        u = X @ beta
        return float(k @ log_expit(u) + (m - k) @ log_expit(-u))

    value = loglik(beta)
    for _ in range(60):
        p = expit(X @ beta)
        gradient = X.T @ (k - m * p)
        hessian = X.T @ (X * (m * p * (1 - p))[:, None])
        step = np.linalg.lstsq(hessian, gradient, rcond=1e-12)[0]
        t = 1.0
        while t > 1e-10:
            trial = loglik(beta + t * step)
            if trial >= value - 1e-12:
                break
            t *= 0.5
        beta, change, value = beta + t * step, trial - value, trial
        if abs(change) < 1e-10 * (1 + abs(value)):
            break
    return beta, value


def _davidson(votes):
    """Davidson's (1970) tie model fitted to the pair counts: (sum-zero theta, nu)."""
    n, a, b = votes.n, votes.a, votes.b
    wa, wb, t = votes.lo_wins, votes.hi_wins, votes.ties

    def objective(params):
        theta, log_nu = params[:n], params[n]
        ua, ub = theta[a], theta[b]
        ut = log_nu + 0.5 * (ua + ub)
        top = np.maximum(np.maximum(ua, ub), ut)
        ea, eb, et = np.exp(ua - top), np.exp(ub - top), np.exp(ut - top)
        log_d = top + np.log(ea + eb + et)
        value = -(wa @ ua + wb @ ub + t @ ut - (wa + wb + t) @ log_d) + 0.5 * params[:n].sum() ** 2
        total = wa + wb + t
        pa, pb, pt = ea / (ea + eb + et), eb / (ea + eb + et), et / (ea + eb + et)
        ga = wa + 0.5 * t - total * (pa + 0.5 * pt)  # d loglik / d theta_a
        gb = wb + 0.5 * t - total * (pb + 0.5 * pt)
        grad = np.zeros(n + 1)
        grad[:n] = -(np.bincount(a, ga, n) + np.bincount(b, gb, n)) + params[:n].sum()
        grad[n] = -(t.sum() - total @ pt)
        return value, grad

    start = np.zeros(n + 1)
    start[n] = np.log(max(t.sum(), 0.5) / max((wa + wb).sum(), 1.0) * 2.0)
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "maxiter": 2000})
    theta = result.x[:n] - result.x[:n].mean()
    return theta, float(np.exp(result.x[n]))


def _rank_of(score):
    order = np.argsort(-score, kind="stable")
    rank = np.empty(len(score), dtype=int)
    rank[order] = np.arange(1, len(score) + 1)
    return rank


def ties_probe(board, votes, theta) -> Probe:
    question = "Do ties depend only on how close the two models are (as both tie conventions assume)?"
    test = (f"LR test of per-model tie propensities in logit P(tie) = a + b d + c d^2 (+ eta_i + eta_j), d = "
            f"|theta_i - theta_j|; chi-square, n - 1 df; fires at p < {ALPHA:g}")
    n = votes.n
    if votes.ties.sum() == 0 or n < 3:
        return Probe("ties", question, test, None, finding="no ties under this tie rule" if n >= 3 else "two models")
    if len(votes.m) * n > DENSE_MAX:
        return Probe("ties", question, test, None, finding=f"not run: {len(votes.m):,} pairs x {n} models is beyond "
                                                           "the dense test's size")
    d = np.abs(theta[votes.a] - theta[votes.b])
    base = np.column_stack([np.ones_like(d), d, d * d])
    ones = np.zeros((len(d), n))
    ones[np.arange(len(d)), votes.a] = 1.0
    ones[np.arange(len(d)), votes.b] = 1.0
    full = np.hstack([base, ones @ basis(n)])
    _, null_value = _binomial_fit(base, votes.ties, votes.m)
    beta, full_value = _binomial_fit(full, votes.ties, votes.m)
    statistic = max(0.0, 2.0 * (full_value - null_value))
    p = float(chi2.sf(statistic, n - 1))
    propensity = basis(n) @ beta[3:]
    top = int(np.argmax(np.abs(propensity)))
    # the boards under the conventions compared
    drop = _btl(n, votes.a, votes.b, votes.hi_wins, votes.hi_wins + votes.lo_wins)
    david, nu = _davidson(votes)
    half_rank = _rank_of(theta)
    values = {"tie_share": float(votes.ties.sum() / votes.m.sum()), "davidson_nu": nu,
              "largest_propensity_model": votes.models[top], "largest_propensity": float(propensity[top])}
    compared = []
    for name, other in (("drop", drop), ("davidson", david)):
        if other is None:
            continue
        rho = float(spearmanr(theta, other)[0]) if n > 2 else 1.0
        shift = int(np.abs(_rank_of(other) - half_rank).max())
        values[f"{name}_spearman"], values[f"{name}_max_rank_change"] = rho, shift
        compared.append(f"{name}: Spearman {rho:.3f} with the half-win board, ranks move by at most {shift}")
    return Probe("ties", question, test, p < ALPHA, statistic, p,
                 f"ties {values['tie_share']:.1%} of votes; most tie-prone relative to closeness: "
                 f"`{votes.models[top]}` ({propensity[top]:+.2f} log-odds); " + "; ".join(compared), values)


def intransitivity_probe(votes) -> Probe:
    question = "Do the pairs' decisive votes fit one Bradley-Terry scale (no cycles)?"
    test = (f"deviance G^2 against the saturated pair model, decisive votes of pairs with >= {MIN_PAIR} of them; "
            f"chi-square, pairs - models + 1 df; fires at p < {ALPHA:g}")
    decisive = votes.hi_wins + votes.lo_wins
    keep = decisive >= MIN_PAIR
    count, labels = _components(votes.n, votes.a, votes.b, keep)
    if keep.any():
        main = np.bincount(labels[votes.a[keep]]).argmax()
        keep &= labels[votes.a] == main
    used = np.unique(np.concatenate([votes.a[keep], votes.b[keep]]))
    df = int(keep.sum()) - (len(used) - 1)
    if df < 1:
        return Probe("intransitivity", question, test, None, finding=f"too few pairs with >= {MIN_PAIR} decisive votes")
    index = np.full(votes.n, -1)
    index[used] = np.arange(len(used))
    a, b = index[votes.a[keep]], index[votes.b[keep]]
    w_hi, m = votes.hi_wins[keep], decisive[keep]
    theta = _btl(len(used), a, b, w_hi, m)
    if theta is None:
        return Probe("intransitivity", question, test, None, finding="the decisive votes are separable")
    p_hi = expit(theta[b] - theta[a])
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = 2 * (np.where(w_hi > 0, w_hi * np.log(w_hi / (m * p_hi)), 0.0)
                     + np.where(m - w_hi > 0, (m - w_hi) * np.log((m - w_hi) / (m * (1 - p_hi))), 0.0))
    statistic = float(parts.sum())
    p = float(chi2.sf(statistic, df))
    worst = int(np.argmax(parts))
    lo_name, hi_name = votes.models[used[a[worst]]], votes.models[used[b[worst]]]
    return Probe("intransitivity", question, test, p < ALPHA, statistic, p,
                 f"G^2 = {statistic:.1f} on {df} df over {int(keep.sum())} pairs; largest misfit `{hi_name}` vs "
                 f"`{lo_name}`: won {w_hi[worst] / m[worst]:.2f} of {m[worst]:.0f}, predicted {p_hi[worst]:.2f}",
                 {"df": df, "pairs": int(keep.sum())})


def connectivity_probe(votes) -> Probe:
    question = "Is the board held together by pairs with few votes?"
    test = f"components of the graph of pairs with >= {MIN_PAIR} votes; fires when more than one (a rule)"
    count, labels = _components(votes.n, votes.a, votes.b, votes.m >= MIN_PAIR)
    sizes = np.bincount(labels)
    order = np.argsort(-sizes, kind="stable")
    shown = " and ".join(f"{{{_names(votes.models, np.flatnonzero(labels == c).tolist())}}}" for c in order[:3])
    finding = (f"{count} components linked only by pairs with fewer than {MIN_PAIR} votes: {shown}" if count > 1
               else f"one component; the thinnest pair has {int(votes.m.min())} votes, "
                    f"{votes.n * (votes.n - 1) // 2 - len(votes.m)} pairs never met")
    return Probe("connectivity", question, test, count > 1, float(count), None, finding, {"components": int(count)})


def coverage_probe(board) -> Probe:
    question = "Are some models judged far less than others?"
    test = (f"fires when the least-judged model has under 1/{COVERAGE_RATIO:g} of the most-judged one's judgments "
            "(a rule)")
    stats = board.model_stats()
    judged = stats["judgments"].to_numpy(float)
    low, high = int(np.argmin(judged)), int(np.argmax(judged))
    ratio = float(judged[high] / judged[low])
    return Probe("coverage", question, test, ratio > COVERAGE_RATIO, ratio, None,
                 f"`{board.models[low]}` {judged[low]:,.0f} judgments, `{board.models[high]}` {judged[high]:,.0f} "
                 f"(ratio {ratio:.1f})", {"ratio": ratio, "min": float(judged[low]), "max": float(judged[high])})


def _judge_model_sums(battles, residual):
    """(cells, index, signed): the (judge, model) cells that occur, each vote's two cells (as model_a,
    as model_b), and its residual signed towards that model."""
    n = battles.n_models
    judges = battles.judges.astype(np.int64)
    cells = np.concatenate([judges * n + battles.i, judges * n + battles.j])
    occurring, index = np.unique(cells, return_inverse=True)
    return occurring, index.ravel(), np.concatenate([residual, -residual])


def clustering_probe(board, theta) -> Probe:
    question = "Are each judge's votes correlated (taste shared across a judge's votes)?"
    b = board.battles
    n = b.n_models
    test = (f"per model, z of the within-judge residual cross products (zero when votes are independent); fires "
            f"when the largest exceeds the one-sided {ALPHA:g}/n quantile")
    if b.judges is None:
        return Probe("clustering", question, test, None, finding="no judge column")
    residual = (b.m - b.wins - 0.5 * b.ties) - b.m * expit(theta[b.i] - theta[b.j])
    occurring, index, signed = _judge_model_sums(b, residual)
    cells = len(occurring)
    s = np.bincount(index, signed, cells)
    r2 = np.bincount(index, signed ** 2, cells)
    r4 = np.bincount(index, signed ** 4, cells)
    model = occurring % n
    T = np.bincount(model, s * s - r2, n)
    V = 2 * np.bincount(model, r2 * r2 - r4, n)
    sums = np.bincount(model, r2, n)
    deff = np.bincount(model, s * s, n) / np.maximum(sums, 1e-300)
    z = np.where(V > 0, T / np.sqrt(np.maximum(V, 1e-300)), 0.0)
    top = int(np.argmax(z))
    cut = float(norm.isf(ALPHA / n))
    p = float(min(1.0, n * norm.sf(z[top])))
    values = {"design_effect_median": float(np.median(deff)), "design_effect_max": float(deff.max()),
              "z_max": float(z[top])}
    ses = ""
    if board.se_method == "cluster":  # the board's own design effect: (clustered SE / model SE)^2
        model = debias_rows(board.pairs.rows(b.contexts, n), board.theta, se="model")
        if model.available:
            ratio = (_score_se(board.result, board.default_context) / _score_se(model, board.default_context)) ** 2
            values.update(se_design_effect_median=float(np.median(ratio)), se_design_effect_max=float(ratio.max()))
            ses = f"; (clustered / model SE)^2 median {np.median(ratio):.2f}, largest {ratio.max():.2f}"
    return Probe("clustering", question, test, bool(z[top] > cut), float(z[top]), p,
                 f"design effect of the score equations median {np.median(deff):.2f}, largest {deff.max():.2f} "
                 f"(`{b.models[int(np.argmax(deff))]}`){ses}; largest z {z[top]:.1f} (`{b.models[top]}`, "
                 f"cut {cut:.2f})",
                 values)


def _score_se(result, x) -> np.ndarray:
    """SEs of the scores x'theta_i of a debiased result."""
    n, d = result.theta_d.shape
    columns = np.einsum("ai,e->aei", to_reduced(np.eye(n)), x).reshape((n - 1) * d, n)
    root = solve_triangular(result.factor, columns, trans="T")
    return np.sqrt(np.einsum("pk,pk->k", root, root))


def influence_probe(board, theta, se) -> Probe:
    question = "Does one judge move the board?"
    test = (f"for the {TOP_JUDGES} judges with most votes: one-step leave-one-judge-out change of the scores "
            f"relative to their SE, and a chi-square test of the judge's votes against the rest; fires when a "
            f"judge moves a score by >= {INFLUENCE_SE:g} SE and its votes are inconsistent at {ALPHA:g}/judges")
    b = board.battles
    if b.judges is None:
        return Probe("influence", question, test, None, finding="no judge column")
    n, Q = b.n_models, basis(b.n_models)
    p = expit(theta[b.i] - theta[b.j])
    residual = (b.m - b.wins - 0.5 * b.ties) - b.m * p
    w = b.m * p * (1 - p)
    L = np.zeros((n, n))
    np.add.at(L, (b.i, b.j), -w)
    L = L + L.T
    L[np.diag_indices(n)] = np.bincount(b.i, w, n) + np.bincount(b.j, w, n)
    K_inv = np.linalg.inv(Q.T @ L @ Q)
    votes = np.bincount(b.judges, b.m, b.judge_count)
    top = np.argsort(-votes, kind="stable")[:TOP_JUDGES]
    top = top[votes[top] > 0]
    rank = np.full(b.judge_count, -1)
    rank[top] = np.arange(len(top))
    rows = np.flatnonzero(rank[b.judges] >= 0)
    J = len(top)
    g = rank[b.judges[rows]]
    S = np.zeros((J, n))
    np.add.at(S, (g, b.i[rows]), residual[rows])
    np.add.at(S, (g, b.j[rows]), -residual[rows])
    change = -(S @ Q) @ K_inv @ Q.T  # (J, n): one Newton step of the fit without the judge
    relative = np.abs(change) / se[None, :]
    influence = relative.max(axis=1)
    pvalues = np.ones(J)
    for k in np.flatnonzero(influence >= INFLUENCE_SE):
        sel = rows[g == k]
        V = np.zeros((n, n))
        np.add.at(V, (b.i[sel], b.j[sel]), -w[sel])
        V = V + V.T
        V[np.diag_indices(n)] = np.bincount(b.i[sel], w[sel], n) + np.bincount(b.j[sel], w[sel], n)
        values, vectors = np.linalg.eigh(V)
        use = values > 1e-9 * max(values.max(), 1e-300)
        proj = vectors[:, use].T @ S[k]
        pvalues[k] = chi2.sf(float(proj @ (proj / values[use])), int(use.sum()))
    flagged = np.flatnonzero((influence >= INFLUENCE_SE) & (pvalues < ALPHA / max(J, 1)))
    worst = int(np.argmax(influence)) if J else 0
    exact = _exact_change(board, b.judges != top[worst], theta, se) if J else 0.0
    label = b.judge_labels[top[worst]] if J else ""
    finding = (f"largest: judge `{label}` ({votes[top[worst]]:,.0f} votes) moves a score by {influence[worst]:.2f} SE "
               f"(refitted without it: {exact:.2f} SE)")
    if flagged.size:
        finding += f"; inconsistent and influential: {', '.join(f'`{b.judge_labels[top[k]]}`' for k in flagged[:5])}"
    return Probe("influence", question, test, bool(flagged.size), float(influence[worst]) if J else 0.0,
                 float(pvalues[worst]) if J else None, finding,
                 {"judges_tested": J, "largest_influence_se": float(influence[worst]) if J else 0.0,
                  "refitted_influence_se": exact, "flagged": [b.judge_labels[top[k]] for k in flagged]})


def _exact_change(board, keep, theta, se) -> float:
    b = board.battles
    lo, hi = np.minimum(b.i, b.j)[keep], np.maximum(b.i, b.j)[keep]
    hi_score = np.where(b.i > b.j, b.m - b.wins - 0.5 * b.ties, b.wins + 0.5 * b.ties)[keep]
    refit = _btl(b.n_models, lo, hi, hi_score, b.m[keep], b.ties[keep])
    return float("nan") if refit is None else float((np.abs(refit - theta) / se).max())


def audit_board(board) -> Audit:
    """The seven probes (module docstring) of a fitted plain :class:`~study.leaderboard.Leaderboard`.

    Returns
    -------
    Audit
        ``probes`` (a :class:`Probe` each), ``fired`` (the names of those that fired).
    """
    b = board.battles
    if b.contextual:
        raise LeaderboardInputError(f"{b.source}: the audit examines the plain board; drop --category, --features "
                                    "and --context")
    votes = _Votes(b)
    x = board.default_context
    theta = board.result.theta_d @ x
    root = board.covariance_root(x)
    se = np.sqrt(np.einsum("pk,pk->k", root, root))
    probes = [position_probe(board), ties_probe(board, votes, theta), intransitivity_probe(votes),
              connectivity_probe(votes), coverage_probe(board), clustering_probe(board, theta),
              influence_probe(board, theta, se)]
    return Audit(source=b.source, probes=probes)
