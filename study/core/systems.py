"""Newton systems of the penalised likelihood on the sum-zero space, and their solvers.

The objective's Hessian is H = sum_k w_k r_k r_k' + diag(q) (x) I_d (the loss's graph-Laplacian
Hessian plus per-item quadratic weights q: ridge, tie-break and ball multipliers), and a Newton
step solves K beta = rhs with K = C'HC, C = Q (x) I_d (Q: Helmert, :mod:`study.core.contrasts`).  Two
exact solvers, chosen by size:

* :class:`PrimalFactor` -- the dense Cholesky factor of K, ((n-1)d)^3 / 3 flops.  K is assembled
  from the per-edge Gram matrices: sum_e (q_e q_e') (x) G_e for small graphs, otherwise as the item
  blocks of H transformed by Q on both item axes (O(n^2 d^2), never O((nd)^3)).
* :class:`RowSpaceFactor` -- while there are fewer rows t than parameters (n-1)d and every q_i > 0,
  the Woodbury identity H^{-1} = D^{-1} - D^{-1} R' W^{1/2} N^{-1} W^{1/2} R D^{-1} with
  N = I + W^{1/2} R D^{-1} R' W^{1/2} (t x t, eigenvalues >= 1), D = diag(q) (x) I: t^3 / 3 flops,
  so a step's cost grows with the stored rows, not with ((n-1)d)^3.  With equal weights H maps the
  sum-zero space onto itself and K^{-1} rhs = Q' H^{-1} Q rhs; otherwise the sum-zero constraint
  is enforced through its d Lagrange multipliers (the bordered system of paper eq. ``deb``).

:class:`Factor` wraps either with rank-one terms (new comparison rows) folded in by Woodbury, so
that the previous step's factor serves the next step's chord iterations; below 150 parameters a
kept dense factor becomes its explicit inverse at its first new row (:class:`DenseInverse`, rows
by Sherman-Morrison), so that each of the next refit's solves is one BLAS product.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, blas, lapack

from . import costs
from .contrasts import basis, from_reduced, items_from_reduced, reduced_from_items, to_reduced
from .likelihood import ComparisonData, blocks_to_matrix

SMALL_GRAPH_ENTRIES = 2_000_000  # k^2 E of the edge-Gram route to K
# Below this many parameters a dense factor costs microseconds and the row-space solver's extra
# numpy calls cost more than they save (measured at Setting B, 90 parameters).
ROW_SPACE_MIN_PARAMETERS = 150


def cholesky(matrix: np.ndarray) -> np.ndarray:
    """Upper Cholesky factor via LAPACK dpotrf directly (scipy.linalg's wrappers cost ~50 us a
    call in validation, which dominates at these sizes); raises LinAlgError if not PD."""
    factor, info = lapack.dpotrf(matrix, lower=0, clean=0)
    if info != 0:
        raise LinAlgError(f"matrix not positive definite (dpotrf info={info})")
    return factor


def cholesky_solve(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    out, info = lapack.dpotrs(factor, rhs, lower=0)
    if info != 0:
        raise LinAlgError(f"dpotrs failed (info={info})")
    return out


def _uniform(quad) -> bool:
    return quad is None or bool((quad == quad[0]).all())


_EYES: dict = {}


def _eye(size: int) -> np.ndarray:
    """np.eye(size), made once per size (do not modify it)."""
    eye = _EYES.get(size)
    if eye is None:
        eye = _EYES[size] = np.eye(size)
    return eye


def add_quadratic(reduced: np.ndarray, quad, d: int) -> np.ndarray:
    """reduced + (Q' diag(quad) Q) (x) I_d, in place (``reduced`` must be a fresh C-contiguous array)."""
    if quad is None:
        return reduced
    if _uniform(quad):  # Q'Q = I: a constant weight only shifts the diagonal
        if quad[0] != 0.0:
            reduced.reshape(-1)[:: reduced.shape[0] + 1] += quad[0]  # a strided view: cheaper than .flat
        return reduced
    k = len(quad) - 1
    # the entries (a, i, b, i) gain small[a, b]: added through a diagonal view, instead of adding
    # small (x) I_d whole (the same sums where I_d is 1; the others were + 0.0), 2x faster
    np.einsum("aibi->abi", reduced.reshape(k, d, k, d))[...] += reduced_weights(quad)[:, :, None]
    return reduced


_LAST_WEIGHTS: list = [None]  # (quad's bytes, Q' diag(quad) Q) of the last call, one tuple (thread-safe)


def reduced_weights(quad: np.ndarray) -> np.ndarray:
    """Q' diag(quad) Q, (n-1, n-1) (read-only).  The last result is kept: a Newton solve asks for
    the same weights at its objective and at every factorisation."""
    key = quad.tobytes()
    last = _LAST_WEIGHTS[0]
    if last is None or last[0] != key:
        small = to_reduced(to_reduced(np.diag(quad)).T)
        small.flags.writeable = False
        last = _LAST_WEIGHTS[0] = (key, small)
    return last[1]


def reduced_hessian(data: ComparisonData, u: np.ndarray, quad=None) -> np.ndarray:
    """K = C'(H_L + diag(quad) (x) I)C, dense ((n-1)d, (n-1)d), from the edge Grams at margins u."""
    grams = data.edge_grams(None, u)
    n, d = data.n_items, data.dim
    k, n_edges = n - 1, len(grams)
    if k * k * n_edges <= SMALL_GRAPH_ENTRIES:
        cache = getattr(data, "_reduced_map", None)
        if cache is None or cache[0] != n_edges:
            q = basis(n)
            qe = q[np.asarray(data.edge_hi, dtype=np.intp)] - q[np.asarray(data.edge_lo, dtype=np.intp)]
            data._reduced_map = cache = (n_edges, np.einsum("ea,eb->abe", qe, qe).reshape(k * k, n_edges))
        red = (cache[1] @ grams.reshape(n_edges, d * d)).reshape(k, k, d, d)
    else:  # item blocks of H, then Q' on both item axes (each transform along a contiguous axis): O(n^2 d^2)
        blocks = data.hessian_blocks(None, u)
        half = np.ascontiguousarray(to_reduced(blocks).transpose(1, 0, 2, 3))  # [b, a] = (Q' H)[a, b]
        red = to_reduced(half).transpose(1, 0, 2, 3)
    red = np.ascontiguousarray(red.transpose(0, 2, 1, 3)).reshape(k * d, k * d)
    return add_quadratic(red, quad, d)


class PrimalFactor:
    """Dense Cholesky factor of K; damped if K is not numerically positive definite."""

    def __init__(self, matrix: np.ndarray):
        try:
            self.cho = cholesky(matrix)
            return
        except LinAlgError:
            pass
        scale = max(float(np.trace(matrix)) / matrix.shape[0], 1.0)
        for damping in (1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1.0):
            try:
                self.cho = cholesky(matrix + damping * scale * np.eye(matrix.shape[0]))
                return
            except LinAlgError:
                continue
        raise LinAlgError("reduced Hessian is not positive definite even after damping")

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return cholesky_solve(self.cho, rhs)


class RowSpaceFactor:
    """K^{-1} through the t x t row-space system (see the module docstring); needs quad > 0."""

    def __init__(self, data: ComparisonData, u: np.ndarray, quad: np.ndarray, sparse: bool = False):
        self.data = data
        self.rows = data.t  # the data may grow later; this factor is of its first rows
        self.quad = np.asarray(quad, dtype=float)
        self.uniform = _uniform(self.quad)
        self.sw = np.sqrt(data.weights(u))
        if self.uniform:
            gram = data.row_gram() * (1.0 / self.quad[0])
            system = self.sw[:, None] * gram * self.sw[None, :]
        elif sparse:  # only rows that share an item interact: O(sum_i rows_i^2) entries, not t^2
            system = data.scaled_weighted_row_gram(1.0 / self.quad, self.sw)
        else:
            gram = data.weighted_row_gram(1.0 / self.quad)
            system = self.sw[:, None] * gram * self.sw[None, :]
        system.flat[:: system.shape[0] + 1] += 1.0
        self.cho = cholesky(system)
        self.explicit = None  # N^{-1}, when made explicit (:func:`preconditioner`)
        self.constraint = None
        if not self.uniform:  # H^{-1} J (item form, one column per dimension) and (J'H^{-1}J)^{-1}
            n, d = data.n_items, data.dim
            ones = np.broadcast_to(np.eye(d), (n, d, d)).copy()
            h_j = self._inverse(ones)
            self.constraint = (h_j, np.linalg.inv(h_j.sum(axis=0)))

    def _inverse(self, v: np.ndarray) -> np.ndarray:
        """H^{-1} v for item-form v, (n, d) or (n, d, c)."""
        data, sw = self.data, self.sw
        inv_q = (1.0 / self.quad).reshape((-1,) + (1,) * (v.ndim - 1))
        y = v * inv_q
        z = data.design_times(y, self.rows)
        z = sw * z if z.ndim == 1 else sw[:, None] * z
        s = cholesky_solve(self.cho, z) if self.explicit is None else self.explicit @ z
        s = sw * s if s.ndim == 1 else sw[:, None] * s
        return y - data.design_transpose_times(s) * inv_q

    def item_quadratic(self, theta: np.ndarray, free: np.ndarray) -> np.ndarray:
        """c_f' K^{-1} c_g for c_f = Q'(e_f (x) theta_f), f, g in ``free``: in item form, where the
        columns are sparse, (e_f (x) theta_f)' Pi H^{-1} (e_g (x) theta_g) with Pi the sum-zero
        multiplier's correction (the bordered solve ignores the mean of its right-hand side, and
        its result sums to zero, so the Helmert projections drop out; with equal weights the
        projection leaves - theta_f'theta_g / (n q)).  O(t |free| (t + d)), no
        array of size n x |free| x d."""
        data, rows, quad = self.data, self.rows, self.quad
        position = np.full(data.n_items, -1)
        position[free] = np.arange(free.size)
        a, b, X = data.a[:rows], data.b[:rows], data.X[:rows]
        at_b = np.einsum("kd,kd->k", X, theta[b]) / quad[b]
        at_a = np.einsum("kd,kd->k", X, theta[a]) / quad[a]
        scaled = np.zeros((rows, free.size))  # S R D^{-1} (e_f (x) theta_f), column f
        k = np.arange(rows)
        on_b, on_a = position[b] >= 0, position[a] >= 0
        scaled[k[on_b], position[b[on_b]]] += at_b[on_b]
        scaled[k[on_a], position[a[on_a]]] -= at_a[on_a]
        scaled *= self.sw[:, None]
        solved = cholesky_solve(self.cho, scaled) if self.explicit is None else self.explicit @ scaled
        out = np.diag(np.einsum("fd,fd->f", theta[free], theta[free]) / quad[free]) - scaled.T @ solved
        if self.constraint is not None:
            h_j, inverse = self.constraint
            g = np.einsum("fd,fde->fe", theta[free], h_j[free])
            out -= g @ inverse @ g.T
        else:  # equal weights: P H^{-1} P = H^{-1} - J J' / (n q) with P the projection on sum zero
            out -= theta[free] @ theta[free].T / (data.n_items * quad[0])
        return out

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        data = self.data
        k, d = data.n_items - 1, data.dim
        shape = (k, d) if rhs.ndim == 1 else (k, d, rhs.shape[1])
        h = self._constrained(self._inverse(from_reduced(rhs.reshape(shape))))
        return to_reduced(h).reshape(rhs.shape)

    def _constrained(self, h: np.ndarray) -> np.ndarray:
        if self.constraint is not None:  # the sum-zero multiplier: J'delta = 0
            h_j, inverse = self.constraint
            mu = inverse @ h.sum(axis=0)
            h = h - (np.einsum("ide,e->id", h_j, mu) if h.ndim == 2 else np.einsum("ide,ec->idc", h_j, mu))
        return h

    def solve_item(self, v: np.ndarray) -> np.ndarray:
        """The same solve in item form: Q K^{-1} Q' v for sum-zero item-form v ((n d,) or (n d, c),
        flattened item vectors), i.e. P H^{-1} v (with the sum-zero multiplier where the weights
        differ) and P the projection onto sum zero, which Q' applies implicitly in :meth:`solve`."""
        n, d = self.data.n_items, self.data.dim
        h = self._constrained(self._inverse(v.reshape((n, d) + v.shape[1:])))
        h = h - h.sum(axis=0) / n
        return h.reshape(v.shape)


def symmetric_inverse(factor: np.ndarray) -> np.ndarray:
    """A^{-1} (full, symmetric) from the upper Cholesky factor of A."""
    inverse, info = lapack.dpotri(factor)
    if info != 0:
        raise LinAlgError(f"dpotri failed (info={info})")
    return np.triu(inverse) + np.triu(inverse, 1).T


class SymmetricInverse:
    """A^{-1} held explicitly as its upper triangle (LAPACK dpotri on the Cholesky factor; the
    strict lower triangle is never read) and applied by BLAS symv/symm: a solve is one pass over
    half the matrix, bound by memory traffic, several times faster than the two triangular solves
    of the factor at a few hundred rows and up, and twice as fast as a product with the full
    symmetrised inverse (which also costs a copy of the matrix to form).  In single precision
    (``single``) for a preconditioner of a well-conditioned system: its 1e-7 relative rounding,
    times the condition number, costs conjugate gradients nothing measurable where a ridge or a
    tie-break weight on every item bounds that number; their residuals stay in double."""

    def __init__(self, factor: np.ndarray, single: bool = False):
        upper, info = (lapack.spotri if factor.dtype == np.float32 else lapack.dpotri)(factor)
        if info != 0:
            raise LinAlgError(f"potri failed (info={info})")
        self.upper = upper.astype(np.float32, copy=False) if single else upper

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        x = rhs.astype(self.upper.dtype, copy=False)
        # the routine follows from the precision held (not kept on the instance: an online ranker's
        # checkpoint holds arrays and core objects only)
        single = self.upper.dtype == np.float32
        if x.ndim == 1:
            out = (blas.ssymv if single else blas.dsymv)(1.0, self.upper, x)
        else:
            out = (blas.ssymm if single else blas.dsymm)(1.0, self.upper, x)
        return out.astype(float, copy=False)

    __matmul__ = solve


class ExplicitInverse(SymmetricInverse):
    """The dense reduced Hessian's inverse as a preconditioner (:class:`SymmetricInverse`, by
    default in single precision)."""

    def __init__(self, factor: np.ndarray, single: bool = True):
        super().__init__(factor, single)


class ItemInverse(ExplicitInverse):
    """(H + q I)^{-1} in item coordinates, for an equal weight q > 0 on every item (a ridge): H + qI
    maps the sum-zero space onto itself (H J = 0), so on it this is Q K^{-1} Q' -- the dense
    preconditioner of conjugate gradients in item coordinates (:mod:`study.core.iterative`),
    assembled from the item blocks of H without the transforms of the reduced Hessian."""

    def __init__(self, factor: np.ndarray, data: ComparisonData, single: bool = True):
        super().__init__(factor, single)
        self.data = data

    def solve_item(self, v: np.ndarray) -> np.ndarray:
        """Q K^{-1} Q' v for sum-zero item-form v ((n d,) or (n d, c)), projected onto sum zero
        (the single-precision product leaves a rounding-sized mean)."""
        n, d = self.data.n_items, self.data.dim
        out = SymmetricInverse.solve(self, v).reshape((n, d) + v.shape[1:])
        out -= out.sum(axis=0) / n
        return out.reshape(v.shape)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """K^{-1} rhs for reduced rhs (through the item form)."""
        n, d = self.data.n_items, self.data.dim
        return reduced_from_items(self.solve_item(items_from_reduced(rhs, n, d)), n, d)


def _row_space(data: ComparisonData, quad: np.ndarray) -> bool:
    return (ROW_SPACE_MIN_PARAMETERS <= data.n_parameters and data.t < data.n_parameters
            and data.t <= data.row_space_rows and bool(np.all(quad > 0.0)))


def factorize(data: ComparisonData, u: np.ndarray, quad: np.ndarray) -> "Factor":
    """The cheaper exact factor of K at margins u: row space while t < (n-1)d (every q_i > 0 and
    enough parameters for it to pay), else the dense reduced Hessian."""
    costs.add("factorisations")
    if _row_space(data, quad):
        try:
            return Factor(RowSpaceFactor(data, u, quad))
        except LinAlgError:  # cannot happen in exact arithmetic (N >= I); fall back regardless
            pass
    return Factor(PrimalFactor(reduced_hessian(data, u, quad)))


def preconditioner(data: ComparisonData, u: np.ndarray, quad: np.ndarray, single: bool):
    """A solver of K at margins u held for many applications (the PCG preconditioner of
    :mod:`study.core.iterative`): the row-space system with its inverse made explicit (double:
    N = I + ... / eps is far worse conditioned than K), else the dense reduced Hessian's explicit
    inverse, in single precision if ``single`` -- then factorised and inverted in single precision
    too (LAPACK spotrf/spotri: half the time of dpotrf/dpotri and of the cast), falling back on
    double precision where K is not numerically positive definite in single."""
    costs.add("factorisations")
    if _row_space(data, quad):
        try:
            base = RowSpaceFactor(data, u, quad, sparse=True)
            base.explicit = SymmetricInverse(base.cho)
            return base
        except LinAlgError:  # cannot happen in exact arithmetic (N >= I); fall back regardless
            pass
    if _uniform(quad) and quad[0] > 0.0:  # a ridge: in item coordinates (:class:`ItemInverse`)
        matrix = blocks_to_matrix(data.hessian_blocks(None, u))
        matrix.reshape(-1)[:: matrix.shape[0] + 1] += quad[0]

        def inverse(factor, single):
            return ItemInverse(factor, data, single)
    else:
        matrix = reduced_hessian(data, u, quad)
        inverse = ExplicitInverse
    if single:
        factor, info = lapack.spotrf(matrix.astype(np.float32), lower=0, clean=0)
        if info == 0:
            return inverse(factor, single=True)
    return inverse(PrimalFactor(matrix).cho, single)


class Factor:
    """A base factor of K0 plus rank-one terms v v' added since (one per new comparison row),
    solved by the Woodbury identity.  Between refits the Hessian changes by the new row's term
    (captured exactly here) and by the drift of the old rows' weights (small), so chord steps
    with this factor converge fast without refactorising."""

    max_rank = 8

    def __init__(self, base, item: bool = False):
        self.base = base
        # item form (a base with ``solve_item``, the PCG preconditioner): V and Z hold the
        # columns' item-form images Q v (flattened, n d rows), so that conjugate gradients in item
        # coordinates apply the factor without transforms (inner products agree: Q is orthonormal)
        self.item = bool(item)
        self.V = None  # (k, r) rank-one columns (item form: (n d, r))
        self.Z = None  # K0^{-1} V (item form: Q K0^{-1} Q' V)
        self.small = None  # Cholesky of I + V'Z
        self.W = None  # Z (I + V'Z)^{-1}: a solve is then K0^{-1} rhs - W V'K0^{-1} rhs

    def _shape(self):
        data = self.base.data
        return data.n_items, data.dim

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self.item:
            n, d = self._shape()
            return reduced_from_items(self.solve_item(items_from_reduced(rhs, n, d)), n, d)
        out = self.base.solve(rhs)
        if self.V is not None:
            out -= self.W @ (self.V.T @ out)
        return out

    def solve_item(self, v: np.ndarray) -> np.ndarray:
        """Q K^{-1} Q' v for sum-zero item-form v ((n d,) or (n d, c)); item-form factors only."""
        out = self.base.solve_item(v)
        if self.V is not None:
            out = out - self.W @ (self.V.T @ out)
        return out

    def item_quadratic(self, theta: np.ndarray, free: np.ndarray):
        """c_f' K^{-1} c_g (see :meth:`RowSpaceFactor.item_quadratic`), or None where the base
        solver has no item-form route."""
        quadratic = getattr(self.base, "item_quadratic", None)
        if quadratic is None:
            return None
        out = quadratic(theta, free)
        if self.V is not None:  # the Woodbury terms: c_f'Z (I + V'Z)^{-1} Z'c_g
            n, d = theta.shape
            z_item = self.Z.reshape(n, d, -1) if self.item else from_reduced(self.Z.reshape(n - 1, d, -1))
            zc = np.einsum("fd,fdr->fr", theta[free], z_item[free])
            out = out - zc @ cholesky_solve(self.small, zc.T)
        return out

    def add(self, column: np.ndarray, max_rank: int | None = None, solved: np.ndarray | None = None):
        """A new factor for K0 + V V' + column column' (only the new column is solved, O(p^2)); None
        once the rank budget (``max_rank``, default :attr:`max_rank`) is used up.  A small dense
        factor (:class:`DenseInverse`'s sizes) becomes its explicit inverse here: it is kept for
        the next refit, whose solves are then one product each (``solved``, K^{-1} column, is used
        there if given)."""
        rank = 1 if self.V is None else self.V.shape[1] + 1
        if rank > (self.max_rank if max_rank is None else max_rank):
            return None
        if self.V is None and isinstance(self.base, PrimalFactor) and len(self.base.cho) < DENSE_INVERSE_MAX_ORDER:
            try:
                return DenseInverse.from_cholesky(self.base.cho).add(column, max_rank, solved)
            except LinAlgError:  # cannot happen for a (damped) positive definite K: the Woodbury route then
                pass
        if self.item:
            column = items_from_reduced(column, *self._shape())
        solved = (self.base.solve_item if self.item else self.base.solve)(column)
        new = Factor(self.base, self.item)
        if self.V is None:
            new.V, new.Z = column[:, None], solved[:, None]
        else:
            new.V, new.Z = np.column_stack([self.V, column]), np.column_stack([self.Z, solved])
        new.small = cholesky(_eye(rank) + new.V.T @ new.Z)
        new.W = cholesky_solve(new.small, new.Z.T).T
        return new


DENSE_INVERSE_MAX_ORDER = 150  # (n - 1) d below which a kept factor is held as its explicit inverse


class DenseInverse:
    """K^{-1} of a small reduced Hessian held explicitly, as its upper triangle (LAPACK ``potri`` on the
    Cholesky factor; Fortran order, as BLAS reads it), with rank-one terms v v' (new comparison rows)
    folded in by Sherman-Morrison: (K + v v')^{-1} = M - (M v)(M v)' / (1 + v'M v) (BLAS ``syr``).
    The factor a refit hands to the next one becomes this (:meth:`Factor.add`): at the paper's sizes
    ((n-1)d = 40, 90) a solve is then one BLAS ``symv`` and a new row one ``syr``, where the Cholesky
    factor with Woodbury columns took two triangular solves (a LAPACK call of a few microseconds of
    overhead) and three more products per solve, and a small factorisation per row; the kept factor
    serves most of a refit's solves (the new row's step, chord steps, the polish).  Its one-time cost,
    ``potri``, is paid once per kept factor.  The inverse is exact to K's condition number times
    the machine precision; every use is a Newton-type step whose residual is computed exactly."""

    def __init__(self, upper: np.ndarray, rank: int = 0):
        self.upper = upper
        self.rank = rank

    @classmethod
    def from_cholesky(cls, cho: np.ndarray) -> "DenseInverse":
        """The inverse of the matrix whose upper Cholesky factor is ``cho``."""
        upper, info = lapack.dpotri(cho)
        if info != 0:
            raise LinAlgError(f"dpotri failed (info={info})")
        return cls(upper)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if rhs.ndim == 1:
            return blas.dsymv(1.0, self.upper, rhs)
        return blas.dsymm(1.0, self.upper, rhs)

    def add(self, column: np.ndarray, max_rank: int | None = None, solved: np.ndarray | None = None):
        """K + column column' (``solved``: M column, if known); None once the rank budget
        (``max_rank``, default :attr:`Factor.max_rank`) is used up."""
        if self.rank >= (Factor.max_rank if max_rank is None else max_rank):
            return None
        y = self.solve(column) if solved is None else solved
        return DenseInverse(blas.dsyr(-1.0 / (1.0 + float(column @ y)), y, a=self.upper), self.rank + 1)
