"""Lagrangian debiased estimator and its confidence intervals (paper section "Asymptotic
Normality", labels ``Lagdual`` and ``deb``).

Psi_t = [[H_t(theta), tM J], [tM J', 0]] with J = 1_n (x) I_d; Phi = Psi^{-1}.  Because J spans
the complement of the sum-zero space, Phi_11 = C (C' H C)^{-1} C' for C = Q (x) I_d with Q an
orthonormal basis of sum-zero contrasts; we compute it that way (a Cholesky factorisation of the
(n-1)d reduced Hessian: Psi_t is declared singular when the Cholesky factorisation fails or
LAPACK's reciprocal condition estimate (dpocon, 1-norm) is below ``RCOND``).
Then theta_d = theta - Phi_11 grad L_t(theta) (the gradient of the *unpenalised* loss) and the
CI for theta*_{ik} is theta_d_{ik} +/- z sqrt((Phi_11)_{ii,kk}).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import LinAlgError, lapack
from scipy.special import expit
from scipy.stats import norm

from . import _validate as check
from . import decisions, outcomes, sandwich
from .contrasts import from_reduced, to_reduced
from .guards import check_fit_size, check_theta_for_debias
from .likelihood import ComparisonData
from .systems import cholesky, cholesky_solve, reduced_hessian

RCOND = 1e-10  # Psi_t is "singular" when the reduced Hessian's condition number exceeds 1/RCOND
DIAGONAL_BLOCKS_FROM_PARAMETERS = 300  # n d from which cov avoids the explicit inverse
BLOCK_ENTRIES = 1 << 22  # floats of one block of right-hand sides (32 MB) for the diagonal blocks of Phi_11


@dataclass
class DebiasResult:
    """The debiased estimate (paper eq. ``deb``) and the pieces of Phi_11 behind its CIs.

    Only ``theta_d`` is computed up front.  Phi_11's pieces come from the Cholesky factor U of
    C'HC on first use (and are cached): the UCB index needs x'(Phi_11)_ii x for one context
    (:meth:`spread`, one triangular solve), the CIs need the diagonal blocks ``cov``, the diagrams
    the whole ``phi11``.

    Attributes
    ----------
    theta_d : ndarray, shape (n, d)
        The debiased estimate (NaN while ``available`` is False).
    available : bool
        False while Psi_t is singular (the data do not identify theta); then every array is NaN.
    condition : float
        Condition number of C'HC (inf when singular).
    factor : ndarray or None
        The upper Cholesky factor U of C'HC = U'U (for ``se_method="sandwich"``: U'U is the inverse
        of the reduced sandwich covariance, :mod:`study.core.sandwich`).
    se_method : str
        Which covariance the methods give: ``"model"`` (Phi_11, the paper's) or ``"sandwich"``.
    comparisons : float or None
        N, the number of comparisons behind the estimate (the sum of the rows' m); the clock of
        the confidence sequences (:meth:`cs`).  None when unknown.
    """

    theta_d: np.ndarray
    available: bool
    condition: float
    factor: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    se_method: str = "model"
    comparisons: float | None = None

    def _nan(self, *shape) -> np.ndarray:
        return np.full(shape, np.nan)

    @property
    def reduced_inverse(self) -> np.ndarray | None:
        """(C' H C)^{-1}, so that Phi_11 = C (C' H C)^{-1} C'."""
        if self.factor is None:
            return None
        cached = self._cache.get("_reduced_inverse")
        if cached is None:
            inverse, info = lapack.dpotri(self.factor)
            if info != 0:
                raise LinAlgError(f"dpotri failed (info={info})")
            cached = self._cache["_reduced_inverse"] = np.triu(inverse) + np.triu(inverse, 1).T
        return cached

    def _phi_blocks(self) -> np.ndarray:
        """(n, n, d, d): block [i, j] of Phi_11 = C (C'HC)^{-1} C', by the Helmert transform on
        both item axes of the reduced inverse (O(n^2 d^2) after the inverse)."""
        cached = self._cache.get("_blocks")
        if cached is None:
            n, d = self.theta_d.shape
            k = n - 1
            reduced = self.reduced_inverse.reshape(k, d, k, d).transpose(0, 2, 1, 3)  # [a, b, alpha, beta]
            both = from_reduced(from_reduced(reduced).transpose(1, 0, 2, 3))  # [j, i, alpha, beta]
            cached = self._cache["_blocks"] = np.ascontiguousarray(both.transpose(1, 0, 2, 3))
        return cached

    @property
    def cov(self) -> np.ndarray:
        """(n, d, d): the diagonal blocks of Phi_11, cov_i = sum_ab Q_ia Q_ib [(C'HC)^{-1}]_ab."""
        n, d = self.theta_d.shape
        if self.factor is None:
            return self._nan(n, d, d)
        cached = self._cache.get("_cov")
        if cached is None:
            # small problems: from the explicit inverse (cheap there); large: without forming it
            small = n * d < DIAGONAL_BLOCKS_FROM_PARAMETERS
            cached = self._cache["_cov"] = (np.einsum("iide->ide", self._phi_blocks()).copy()
                                            if small or "_blocks" in self._cache else self._diagonal_blocks())
        return cached

    def _diagonal_blocks(self) -> np.ndarray:
        """cov_i = B_i'B_i with B_i = U'^{-1} (Q_i (x) I_d)' (the rows of C for item i): triangular
        solves in blocks of items, so that neither (C'HC)^{-1} nor Phi_11 (p^2 and (nd)^2 floats)
        is formed; p^2 n d flops, the order of the factorisation."""
        n, d = self.theta_d.shape
        k = n - 1
        width = max(1, BLOCK_ENTRIES // (k * d * d))
        cov = np.empty((n, d, d))
        for start in range(0, n, width):
            items = np.arange(start, min(n, start + width))
            unit = np.zeros((n, items.size))
            unit[items, np.arange(items.size)] = 1.0
            rows = to_reduced(unit)  # Q' e_i for the block's items, (k, c)
            columns = (rows[:, None, :, None] * np.eye(d)[None, :, None, :]).reshape(k * d, items.size * d)
            solved, info = lapack.dtrtrs(self.factor, columns, lower=0, trans=1)
            if info != 0:
                raise LinAlgError(f"dtrtrs failed (info={info})")
            solved = solved.reshape(k * d, items.size, d)
            cov[items] = np.einsum("pia,pib->iab", solved, solved)
        return cov

    def spread(self, x: np.ndarray) -> np.ndarray:
        """x'(Phi_11)_ii x for every item i, shape (n,): with B = [vec(Q_i x') ...] (the rows of
        C' for context x), the squared column norms of U'^{-1} B (one triangular solve)."""
        n, d = self.theta_d.shape
        if self.factor is None:
            return self._nan(n)
        if "_cov" in self._cache:
            return np.einsum("d,ide,e->i", x, self._cache["_cov"], x)
        columns = np.einsum("ai,e->aei", _contrast_rows(n), x).reshape((n - 1) * d, n)  # Q_i (x) x
        solved, info = lapack.dtrtrs(self.factor, columns, lower=0, trans=1)
        if info != 0:
            raise LinAlgError(f"dtrtrs failed (info={info})")
        return np.einsum("ki,ki->i", solved, solved)

    def pair_spread(self, x: np.ndarray, pairs) -> np.ndarray:
        """Var of x'(theta_d_i - theta_d_j) for each row (i, j) of ``pairs``, shape (P,):
        x'[(Phi_11)_ii + (Phi_11)_jj - 2 (Phi_11)_ij] x, the squared column norms of U'^{-1} B with
        B = [vec((Q_i - Q_j) x') ...] (one triangular solve; NaN while Phi is unavailable)."""
        pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
        n, d = self.theta_d.shape
        if self.factor is None:
            return self._nan(len(pairs))
        basis = to_reduced(np.eye(n))  # Q', (n-1, n)
        q = basis[:, pairs[:, 0]] - basis[:, pairs[:, 1]]  # (n-1, P)
        columns = (q[:, None, :] * np.asarray(x, dtype=float)[None, :, None]).reshape((n - 1) * d, len(pairs))
        solved, info = lapack.dtrtrs(self.factor, columns, lower=0, trans=1)
        if info != 0:
            raise LinAlgError(f"dtrtrs failed (info={info})")
        return np.einsum("kp,kp->p", solved, solved)

    def sample(self, z: np.ndarray) -> np.ndarray:
        """theta_d + C U^{-1} z: a draw from N(theta_d, Phi_11) for a standard normal ``z`` of length
        (n-1) d (the Gaussian approximation of the posterior used by Thompson sampling)."""
        n, d = self.theta_d.shape
        if self.factor is None:
            raise ValueError("Phi_11 is not available (Psi_t is singular): nothing to sample from")
        z = np.asarray(z, dtype=float).reshape((n - 1) * d)
        solved, info = lapack.dtrtrs(self.factor, z, lower=0, trans=0)
        if info != 0:
            raise LinAlgError(f"dtrtrs failed (info={info})")
        return self.theta_d + from_reduced(solved.reshape(n - 1, d))

    @property
    def phi11(self) -> np.ndarray:
        """Phi_11 (nd, nd), item-major index i*d + k."""
        n, d = self.theta_d.shape
        if self.factor is None:
            return self._nan(n * d, n * d)
        cached = self._cache.get("_phi11")
        if cached is None:
            cached = self._cache["_phi11"] = self._phi_blocks().transpose(0, 2, 1, 3).reshape(n * d, n * d)
        return cached

    @property
    def se(self) -> np.ndarray:
        """Standard errors sqrt((Phi_11)_{ii,kk}), shape (n, d)."""
        return np.sqrt(np.einsum("ikk->ik", self.cov))

    def ci(self, level: float = 0.95):
        """(lower, upper), each (n, d): theta_d -/+ z_{(1+level)/2} se."""
        level = check.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
        if not self.available:
            raise ValueError("confidence intervals are not available: Psi_t is singular "
                             f"(condition number {self.condition:.3g}); more data are needed")
        z = norm.ppf(0.5 + level / 2.0)
        half = z * self.se
        return self.theta_d - half, self.theta_d + half

    def cs(self, level: float = 0.95, *, tightest_at, comparisons=None):
        """(lower, upper), each (n, d): the anytime-valid confidence sequence theta_d -/+ se g(eta),
        which covers every theta*_ik at all times at once with probability ``level`` (asymptotically;
        docs/core.md, "Confidence sequences"), with the result's standard errors (model-based or
        sandwich, ``se_method``).

        It is the i.i.d. form of the asymptotic CS of Waudby-Smith et al. (2024): the clock is the
        comparison count and the variance the plug-in ``comparisons * se**2``.  On adaptively
        collected comparisons this holds for a *stable design* only, N_t Phi_t settling to a fixed
        limit along the run (measured along RB's runs in Settings A, B and L: docs/core.md); a policy
        whose design keeps drifting is not covered.

        Parameters
        ----------
        level : float
            The time-uniform coverage, in (0, 1).
        tightest_at : float
            The number of comparisons at which the sequence is tightest (1.55 z_0.975 se at level
            0.95), fixed before the data are seen, e.g. the horizon T x M.
        comparisons : float, optional
            The number of comparisons behind the estimate (default ``self.comparisons``).

        Examples
        --------
        >>> import numpy as np, study
        >>> rng = np.random.default_rng(0)
        >>> i = rng.integers(0, 3, 400); j = (i + 1 + rng.integers(0, 2, 400)) % 3
        >>> X = rng.normal(1.0, 0.5, (400, 2)); truth = np.array([[1., 0.], [0., 1.], [-1., -1.]])
        >>> wins = rng.binomial(5, 1 / (1 + np.exp(-np.einsum("kd,kd->k", X, truth[j] - truth[i]))))
        >>> res = study.debias(study.fit_btl(i, j, X, wins, 5, n_items=3), i, j, X, wins, 5)
        >>> lower, upper = res.cs(0.95, tightest_at=2000)   # tightest after 2,000 comparisons
        >>> bool(np.all(upper - lower > np.subtract(*res.ci(0.95)[::-1])))  # wider than the CI
        True
        """
        from .confseq import cs_factor
        if not self.available:
            raise ValueError("confidence sequences are not available: Psi_t is singular "
                             f"(condition number {self.condition:.3g}); more data are needed")
        comparisons = self.comparisons if comparisons is None else comparisons
        if comparisons is None:
            raise ValueError("the number of comparisons behind the estimate is unknown: pass comparisons=")
        comparisons = check.real("comparisons", comparisons, low=0.0, low_open=True)
        half = cs_factor(comparisons, tightest_at, level) * self.se
        return self.theta_d - half, self.theta_d + half


_CONTRAST_ROWS: dict = {}


def _contrast_rows(n: int) -> np.ndarray:
    """Q' = to_reduced(I_n), (n-1, n), made once per n (the UCB index needs it at every step)."""
    rows = _CONTRAST_ROWS.get(n)
    if rows is None:
        rows = _CONTRAST_ROWS[n] = to_reduced(np.eye(n))
        rows.flags.writeable = False
    return rows


def _unavailable(n, d, condition, comparisons=None) -> DebiasResult:
    return DebiasResult(theta_d=np.full((n, d), np.nan), available=False, condition=condition,
                        comparisons=comparisons)


def debias_data(data: ComparisonData, theta: np.ndarray, *, rcond: float = RCOND) -> DebiasResult:
    """:func:`debias` on a :class:`study.core.likelihood.ComparisonData` (no input checks)."""
    rcond_min = rcond
    n, d = theta.shape
    comparisons = float(data.m[: data.t].sum())
    if data.rank_bound() < (n - 1) * d:  # too few rows per edge: C'HC is singular for every theta
        return _unavailable(n, d, np.inf, comparisons)
    u = data.margins(theta)
    reduced = reduced_hessian(data, u)
    try:
        factor = cholesky(reduced)
    except LinAlgError:
        return _unavailable(n, d, np.inf, comparisons)
    rcond = float(lapack.dpocon(factor, float(np.abs(reduced).sum(axis=0).max()))[0])
    decisions.threshold("Psi_t singular", rcond, rcond_min)
    if not rcond > rcond_min:
        return _unavailable(n, d, np.inf if rcond <= 0 else 1.0 / rcond, comparisons)
    # theta_d = theta - Phi_11 grad = theta - Q [(C'HC)^{-1} Q' grad]  (C = Q (x) I_d)
    step = cholesky_solve(factor, data.reduced_gradient(u))
    theta_d = theta - from_reduced(step.reshape(n - 1, d))
    return DebiasResult(theta_d=theta_d, available=True, condition=1.0 / rcond, factor=factor,
                        comparisons=comparisons)


def debias(theta, i, j, X, wins, m, *, ties=None, se: str = "model", clusters=None,
           rcond: float = RCOND) -> DebiasResult:
    """Lagrangian debiased estimator (paper eq. ``deb``) at ``theta`` for the given comparisons.

    Parameters
    ----------
    theta : array_like, shape (n_items, d)
        The estimate to debias (rows summing to zero, e.g. from :func:`study.fit_btl`; a theta off
        the sum-zero space is refused, not re-centred).
    i, j, X, wins, m, ties
        The comparisons, as in :func:`study.fit_btl`: ``wins[k]`` of row k's ``m[k]`` comparisons
        won outright by ``j[k]``, ``ties[k]`` tied (default none; :mod:`study.core.outcomes`).
    se : {"model", "sandwich", "cluster"}
        The covariance behind ``cov``, ``se`` and ``ci``: the paper's model-based Phi_11; the
        sandwich (robust) one of :mod:`study.core.sandwich`, each comparison a unit, for judgments
        that are not Bernoulli draws (ties); or the cluster-robust sandwich, each cluster (e.g. a
        judge) a unit, for judgments correlated within clusters (:mod:`study.core.batch`).
        ``theta_d`` is the same.
    clusters : array_like, shape (K,), optional
        The cluster of each row (judge or annotator labels, numbers or text), for ``se="cluster"``.
    rcond : float
        Psi_t counts as singular when the reciprocal condition number of C'HC is below this.

    Returns
    -------
    DebiasResult
        ``theta_d`` (n, d), ``cov`` (n, d, d) the diagonal blocks of Phi_11, ``se``, ``phi11``,
        ``ci(level)`` and the anytime-valid ``cs(level, tightest_at=...)``; ``available`` is False
        (arrays NaN) while the data do not identify theta; ``se_method`` says which covariance they
        are; ``comparisons`` is the number of comparisons behind them.

    Raises
    ------
    ValueError
        Bad shapes or values, naming the argument (theta's shape against the comparisons'), a theta
        whose rows do not sum to zero, outcomes in the old form (halves in ``wins``: the message says
        how to convert), or sizes out of reach (with the estimate).

    Notes
    -----
    Rows with the same pair and context are summed into one before the work
    (:mod:`study.core.aggregate`; with ``se="cluster"`` only within a cluster): the estimate and
    every covariance are unchanged, and a million votes of 100 models take a fraction of a second.

    Examples
    --------
    >>> import numpy as np, study
    >>> rng = np.random.default_rng(0)
    >>> i = rng.integers(0, 3, 400); j = (i + 1 + rng.integers(0, 2, 400)) % 3
    >>> X = rng.normal(1.0, 0.5, (400, 2)); truth = np.array([[1., 0.], [0., 1.], [-1., -1.]])
    >>> wins = rng.binomial(5, 1 / (1 + np.exp(-np.einsum("kd,kd->k", X, truth[j] - truth[i]))))
    >>> theta = study.fit_btl(i, j, X, wins, 5, n_items=3)
    >>> lower, upper = study.debias(theta, i, j, X, wins, 5).ci(0.95)
    >>> lower.shape
    (3, 2)
    """
    from .aggregate import aggregate
    from .batch import Rows
    from .threads import one_blas_thread

    theta = check.finite_array("theta", theta, ndim=2)
    rcond = check.real("rcond", rcond, low=0.0, high=1.0)
    n_items, d = theta.shape
    check_theta_for_debias(theta, i, j, X)  # issue 18: theta's shape named, off sum-zero refused
    i, j, X, wins, m = check.comparisons(i, j, X, wins, m, n_items)
    check_fit_size(n_items, d, i.size, "debias", factorisations=1, dense=True)
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns but theta has d={d}")
    wins, ties = outcomes.counted(wins, m, ties)
    se = sandwich.check_se(se, sandwich.DEBIAS_SE_METHODS)
    codes = sandwich.check_clusters(clusters, i.size) if se == "cluster" else None
    rows = aggregate(i, j, X, wins, ties, m, codes)
    prepared = Rows(rows.i, rows.j, rows.X, rows.wins, rows.ties, rows.m, n_items, rows.clusters)
    with one_blas_thread():
        return debias_rows(prepared, theta, se=se, rcond=rcond)


def debias_rows(rows, theta: np.ndarray, *, se: str = "model", rcond: float = RCOND) -> DebiasResult:
    """:func:`debias` on prepared rows (:class:`study.core.batch.Rows`, no input checks): the
    debiased estimate at ``theta`` with the covariance ``se`` (``"cluster"`` needs rows with
    clusters)."""
    from .batch import cholesky_factor, cluster_meat, solve

    n, d = rows.n, rows.d
    p = expit(rows.margins(theta))
    hessian = rows.reduced(rows.grams(rows.m * p * (1.0 - p)))
    factor, condition = cholesky_factor(hessian, rcond)
    if factor is None:
        return DebiasResult(theta_d=np.full((n, d), np.nan), available=False, condition=condition,
                            se_method=se, comparisons=rows.total)
    gradient = to_reduced(rows.transpose_times(rows.m * p - rows.score)).ravel()
    theta_d = theta - from_reduced(solve(factor, gradient).reshape(n - 1, d))
    result = DebiasResult(theta_d=theta_d, available=True, condition=condition, factor=factor, se_method=se,
                          comparisons=rows.total)
    if se == "model":
        return result
    if se == "sandwich":
        meat = rows.reduced(rows.grams(sandwich.comparison_variance(p, rows.score, rows.m, rows.ties)))
    else:
        meat = cluster_meat(rows, rows.score - rows.m * p)
    # a direction without residual variance (all ties at p = 1/2; an item all of whose comparisons are
    # in one cluster, whose score sum the fit sets to 0) leaves the meat singular: then rounding alone
    # decides whether a factor exists, so the meat must be well conditioned, as K must
    if cholesky_factor(meat, rcond)[0] is None:
        return DebiasResult(theta_d=np.full((n, d), np.nan), available=False, condition=np.inf, se_method=se,
                            comparisons=rows.total)
    result.factor = sandwich.precision_factor(hessian, meat)
    return result
