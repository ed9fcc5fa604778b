"""Style control: the Bradley-Terry fit with shared coefficients on the two responses' style, and an
optional position term, as LMArena's ``Rank (StyleCtrl)`` leaderboard does.

**The features** (LMArena's, ``STYLE_ELEMENTS``) are read from the columns of its public battle
logs: ``conv_metadata`` (a struct, a JSON object, or JSON text in CSV) with ``sum_assistant_a_tokens``
(response length), ``header_count_a`` ({h1..h6}), ``list_count_a`` ({ordered, unordered}) and
``bold_count_a`` ({"**", "__"}), and their ``_b`` counterparts; a count given as an object is the
sum of its fields.  The same names as top-level columns are read too.  Other columns are given as
``columns``: ``A:B`` (a per-response count for model_a and for model_b, normalised as LMArena's),
or ``C`` (a numeric per-battle feature already oriented model_a minus model_b, standardised only,
as arena-rank's ``ContextualPairDataset(normalize_features=True)``).

**Normalisation** (FastChat, ``fastchat/serve/monitor/elo_analysis.py``,
``construct_style_matrices`` with ``add_one=True`` and ``apply_ratio=[1, 1, 1, 1]``): for each
battle the difference of the two counts over their sum plus one, (a - b) / (a + b + 1), then
centred and divided by its standard deviation over the battles (population SD, ``np.std``).
A coefficient is thus in log-odds per standard deviation of that normalised difference.

**The model.**  P(model_a beats model_b) = sigma(theta_a - theta_b + gamma'z + delta s), z the
normalised features of the battle, gamma the shared style coefficients, s = +1 when model_a was
shown first (left) and -1 when model_b was (``side``; LMArena's logs show model_a on the left,
so there delta is the first position's advantage in log-odds).  A tie is half a win for each side
(the likelihood y log p + (1 - y) log(1 - p) with y = 1/2: FastChat's duplicated rows give the
same maximum); the tie rule of :mod:`.battles` applies.  theta sums to zero over the models.
Unlike FastChat (scikit-learn's default L2 penalty, C = 1) and arena-rank (a ridge of 1 on the
coefficients) the fit is the unpenalised maximum-likelihood estimate, computed by Newton's method
in the sum-zero coordinates (Armijo backtracking; the gradient's sup norm at most 1e-10 x (1 +
comparisons)).

**Covariance** of (theta, gamma, delta): model-based (the inverse Fisher information), sandwich
(each comparison a unit: the meat sum_k v_k r_k r_k' with v_k of :func:`study.core.sandwich.
comparison_variance`) or judge-clustered (the meat G/(G - 1) sum_g s_g s_g', s_g the sum of judge
g's score contributions, as :func:`study.core.batch.cluster_meat`), factored by
:func:`study.core.sandwich.precision_factor`; ``se="auto"`` takes the leaderboard's.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse
from scipy.linalg import LinAlgError, cholesky, solve_triangular
from scipy.special import expit, log_expit

from ..core.contrasts import basis
from ..core.sandwich import comparison_variance, precision_factor
from .files import LeaderboardInputError, read_table, table_of_frame, where

METADATA = "conv_metadata"
STYLE_ELEMENTS = (("length", "sum_assistant_a_tokens", "sum_assistant_b_tokens"),
                  ("headers", "header_count_a", "header_count_b"),
                  ("lists", "list_count_a", "list_count_b"),
                  ("bold", "bold_count_a", "bold_count_b"))
SIDES = {"model_a": 1.0, "a": 1.0, "model_b": -1.0, "b": -1.0}
POSITION_DEFAULT = "model_a"  # no column: model_a was shown first (LMArena's logs)
MAX_STEPS = 100
TOL = 1e-10
RCOND = 1e-10


@dataclass
class StyleFeatures:
    """The style features of battles: of every row of the files read (:func:`read_style`), or of the
    rows of one :class:`~study.leaderboard.battles.Battles` in its order (made by hand).

    Attributes
    ----------
    raw : ndarray, shape (K, k)
        The normalised differences before standardising ((a - b) / (a + b + 1), or the column).
    names : list of str
        A name per feature.
    side : ndarray or None
        +1 where model_a was shown first, -1 where model_b was (None: no position term).
    position : str or None
        Where ``side`` came from.
    kinds : list of str
        Per feature, ``"ratio"`` ((a - b) / (a + b + 1) of two counts) or ``"difference"`` (a
        column as given).
    every_row : bool
        True: one row per row of the files read, before the tie rule, a self-pair, ``min_votes``
        or a category left any out; :meth:`of` then takes a board's rows by their ``row_ids``.
        False: the rows of the battles given, in their order.
    """

    raw: np.ndarray
    names: list
    side: np.ndarray | None = None
    position: str | None = None
    kinds: list = field(default_factory=list)
    every_row: bool = False

    def of(self, battles) -> "StyleFeatures":
        """The features of the rows of ``battles`` (:class:`~study.leaderboard.battles.Battles`), in
        their order; :class:`LeaderboardInputError` where they cannot be lined up."""
        if not self.every_row:
            if len(self.raw) != battles.rows:
                raise LeaderboardInputError(f"{battles.source}: {len(self.raw)} rows of style features for "
                                            f"{battles.rows} battles")
            return self
        ids = battles.row_ids
        if ids is None or (ids.size and ids.max() >= len(self.raw)):
            raise LeaderboardInputError(f"{battles.source}: the style features were read from other files than "
                                        "these battles (read both from the same files)")
        return StyleFeatures(raw=self.raw[ids], names=self.names, side=None if self.side is None else self.side[ids],
                             position=self.position, kinds=self.kinds)


def parse_columns(text) -> list:
    """``[(name, column_a, column_b or None)]`` of ``--style-columns`` text (``A:B`` or ``C``,
    comma-separated); None: LMArena's ``STYLE_ELEMENTS``."""
    if text is None:
        return list(STYLE_ELEMENTS)
    specs = []
    for token in (t.strip() for t in str(text).split(",")):
        if not token:
            continue
        first, sep, second = token.partition(":")
        first, second = first.strip(), second.strip()
        if sep and not (first and second):
            raise ValueError(f"--style-columns: {token!r} must be A:B (two columns) or one column")
        specs.append((f"{first}-{second}" if sep else first, first, second if sep else None))
    if not specs:
        raise ValueError("--style-columns: no column given")
    names = [s[0] for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"--style-columns: a feature is given twice ({names})")
    return specs


def _column(table: pa.Table, name: str, source: str):
    """(array, label) of a top-level column ``name`` or the field ``name`` of ``conv_metadata``."""
    if name in table.column_names:
        return table.column(name).combine_chunks(), name
    if METADATA in table.column_names:
        meta = table.column(METADATA).combine_chunks()
        if pa.types.is_struct(meta.type) and meta.type.get_field_index(name) >= 0:
            return pc.struct_field(meta, name), f"{METADATA}.{name}"
    found = table.column_names
    raise LeaderboardInputError(f"{source}: no style column {name!r} (neither a column nor a field of "
                                f"{METADATA!r}; found {found})")


def _parse_metadata(column, source):
    values = column.to_pylist()
    try:
        parsed = [None if v is None else json.loads(v) for v in values]
    except json.JSONDecodeError:
        bad = next(k for k, v in enumerate(values) if v is not None and not _is_json(v))
        raise LeaderboardInputError(f"{source}: row {bad + 1}, column {METADATA!r}: not a JSON object") from None
    try:
        return pa.array(parsed)
    except (pa.ArrowException, TypeError):
        raise LeaderboardInputError(f"{source}: column {METADATA!r}: its objects differ in shape") from None


def _is_json(text) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _numbers(array, label: str, source: str, kind: str, counts: bool) -> np.ndarray:
    """Float values of a numeric column, or of a struct's numeric fields summed (``{h1..h6}``)."""
    if pa.types.is_struct(array.type):
        parts = [_numbers(pc.struct_field(array, k), f"{label}.{array.type.field(k).name}", source, kind, counts)
                 for k in range(array.type.num_fields)]
        if not parts:
            raise LeaderboardInputError(f"{source}: column {label!r}: an empty object")
        missing = np.flatnonzero(np.asarray(array.is_null(), dtype=bool))
        if missing.size:
            raise LeaderboardInputError(f"{source}: {where(kind, int(missing[0]), label)}: missing value")
        return np.sum(parts, axis=0)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_null(array.type)):
        raise LeaderboardInputError(f"{source}: column {label!r} must hold numbers, got {array.type}")
    values = np.asarray(array.to_numpy(zero_copy_only=False), dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) | ((values < 0) if counts else False))
    if bad.size:
        shown = array[int(bad[0])].as_py()
        what = "a count >= 0" if counts else "a finite number"
        raise LeaderboardInputError(f"{source}: {where(kind, int(bad[0]), label)}: expected {what}, got {shown!r}")
    return values


def features_of_table(table: pa.Table, source: str, kind: str, specs) -> np.ndarray:
    """(rows, k): every row's normalised difference per feature (module docstring)."""
    if METADATA in table.column_names:  # JSON text (a CSV cell): parsed once into a struct column
        meta = table.column(METADATA).combine_chunks()
        if pa.types.is_string(meta.type) or pa.types.is_large_string(meta.type):
            table = table.set_column(table.column_names.index(METADATA), METADATA, _parse_metadata(meta, source))
    out = np.empty((table.num_rows, len(specs)))
    for c, (name, first, second) in enumerate(specs):
        if second is None:
            out[:, c] = _numbers(*_column(table, first, source), source, kind, counts=False)
        else:
            a = _numbers(*_column(table, first, source), source, kind, counts=True)
            b = _numbers(*_column(table, second, source), source, kind, counts=True)
            out[:, c] = (a - b) / (a + b + 1.0)
    return out


def _sides(table, column, source, kind) -> np.ndarray:
    if column == POSITION_DEFAULT:
        return np.ones(table.num_rows)
    if column not in table.column_names:
        raise LeaderboardInputError(f"{source}: no position column {column!r} (found {table.column_names})")
    values = table.column(column).to_pylist()
    out = np.empty(len(values))
    for k, value in enumerate(values):
        side = SIDES.get(str(value).strip().lower()) if value is not None else None
        if side is None:
            raise LeaderboardInputError(f"{source}: {where(kind, k, column)}: which model was shown first: expected "
                                        f"one of {sorted(SIDES)}, got {value!r}")
        out[k] = side
    return out


def read_style(sources, *, columns=None, position=None, style: bool = True) -> StyleFeatures:
    """The style features (and sides) of every row of the files, file by file.

    :func:`fit_style` takes those of the rows of its battles by their ``row_ids``, so the rows
    that the tie rule, a self-pair, aliases, ``min_votes`` or a category leave out are left out
    here too.

    Parameters
    ----------
    sources : path, DataFrame, Arrow table, or a list of them
        As for :func:`study.leaderboard.read_battles` (the same order).
    columns : str or list, optional
        ``--style-columns`` text or :func:`parse_columns` specs (default: LMArena's four).
    position : str, optional
        ``"model_a"`` (model_a was shown first in every row) or a column naming, per row, which of
        ``model_a``/``model_b`` (``a``/``b``) was shown first; None: no position term.
    style : bool
        False: the position term only (no style features).
    """
    specs = (parse_columns(columns) if columns is None or isinstance(columns, str) else list(columns)) if style else []
    many = sources if isinstance(sources, (list, tuple)) else [sources]
    wanted = {"model_a", "model_b", "winner", "wins_a", "wins_b", "ties", METADATA, position,
              *(c for s in specs for c in s[1:] if c)}
    raws, sides = [], []
    for source in many:
        if isinstance(source, (str, Path)):
            table, kind = read_table(source, wanted - {None})
            name = str(source)
        else:
            table, kind, name = table_of_frame(source), "frame", "frame"
        raws.append(features_of_table(table, name, kind, specs))
        sides.append(_sides(table, position, name, kind) if position is not None else None)
    return StyleFeatures(raw=np.vstack(raws), names=[s[0] for s in specs],
                         side=None if position is None else np.concatenate(sides), position=position,
                         kinds=["difference" if s[2] is None else "ratio" for s in specs], every_row=True)


@dataclass
class StyleFit:
    """The style-controlled fit (module docstring).

    Attributes
    ----------
    theta : ndarray (n,)
        Model scores, logit scale, summing to zero.
    coef : ndarray (q,)
        The style coefficients, then the position term (``names``).
    names : list of str
        The names of ``coef`` (``position`` last where fitted).
    cov : ndarray (n + q, n + q)
        The covariance of (theta, coef).
    root : ndarray (p, n)
        Y with Y'Y the covariance of theta (for rank intervals).
    mean, sd : ndarray (k,)
        The features' normalisation (before the coefficients).
    se_method : str
    steps : int
        Newton steps.
    """

    theta: np.ndarray
    coef: np.ndarray
    names: list
    cov: np.ndarray
    root: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    se_method: str
    steps: int
    position: str | None = None

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))


class _Design:
    """Rows of the style fit: u = theta_a - theta_b + E c, E the extra columns (features, side)."""

    def __init__(self, a, b, E, y, m, n):
        self.a, self.b, self.E, self.y, self.m, self.n = a, b, E, y, m, n
        self.q = E.shape[1]
        self.Q = basis(n)
        self.p = n - 1 + self.q

    def margins(self, beta):
        theta = self.Q @ beta[:self.n - 1]
        return theta[self.a] - theta[self.b] + self.E @ beta[self.n - 1:]

    def loglik(self, u):
        return float(self.y @ u + self.m @ log_expit(-u))  # y u - m log(1 + e^u)

    def reduce(self, full_vector):
        """T' v for a full (n + q) vector."""
        return np.concatenate([self.Q.T @ full_vector[:self.n], full_vector[self.n:]])

    def full_vector(self, g):
        """sum_k g_k r_k, r_k = (e_a - e_b, E_k): the full (n + q) vector."""
        n = self.n
        return np.concatenate([np.bincount(self.a, g, n) - np.bincount(self.b, g, n), self.E.T @ g])

    def gram(self, w):
        """T'(sum_k w_k r_k r_k')T, (p, p)."""
        n, q, a, b = self.n, self.q, self.a, self.b
        L = np.zeros((n, n))
        np.add.at(L, (a, b), -w)
        L = L + L.T
        L[np.diag_indices(n)] = np.bincount(a, w, n) + np.bincount(b, w, n)
        wE = w[:, None] * self.E
        cross = np.zeros((n, q))
        for c in range(q):
            cross[:, c] = np.bincount(a, wE[:, c], n) - np.bincount(b, wE[:, c], n)
        top = np.hstack([self.Q.T @ L @ self.Q, self.Q.T @ cross])
        bottom = np.hstack([cross.T @ self.Q, self.E.T @ wE])
        return np.vstack([top, bottom])

    def cluster_meat(self, g, clusters):
        """T'(G/(G-1) sum_c s_c s_c')T, s_c the sum of cluster c's g_k r_k."""
        n, q = self.n, self.q
        G = int(clusters.max()) + 1
        rows = np.concatenate([clusters, clusters] + [clusters] * q)
        cols = np.concatenate([self.a, self.b] + [np.full(len(g), n + c) for c in range(q)])
        vals = np.concatenate([g, -g] + [g * self.E[:, c] for c in range(q)])
        S = sparse.csr_matrix((vals, (rows, cols)), shape=(G, n + q))
        meat = (S.T @ S).toarray()
        T = np.zeros((n + q, self.p))
        T[:n, :n - 1] = self.Q
        T[n:, n - 1:] = np.eye(q)
        used = int(np.count_nonzero(np.bincount(clusters)))
        return T.T @ meat @ T * (used / (used - 1.0))


def standardise(raw: np.ndarray, names, source: str):
    """(z, mean, sd): the features centred and divided by their SD; a constant one is refused."""
    mean = raw.mean(axis=0)
    sd = raw.std(axis=0)
    flat = np.flatnonzero(~(sd > 1e-12 * np.maximum(1.0, np.abs(mean))))
    if flat.size:
        raise LeaderboardInputError(f"{source}: the style feature {names[flat[0]]!r} is the same in every battle: "
                                    "its effect cannot be estimated; leave it out (--style-columns)")
    return (raw - mean) / sd, mean, sd


def fit_style(battles, features: StyleFeatures, *, se: str = "sandwich") -> StyleFit:
    """The style-controlled BTL fit of ``battles`` (module docstring) with covariance ``se``
    (``model``, ``sandwich`` or ``cluster``); :class:`LeaderboardInputError` on bad input.  The
    features of :func:`read_style` are taken for the rows of ``battles`` by their ``row_ids``
    (:meth:`StyleFeatures.of`)."""
    source, n = battles.source, battles.n_models
    if battles.contextual:
        raise LeaderboardInputError(f"{source}: style control fits the plain board; drop --category, --features and "
                                    "--context (a board per category: filter the file)")
    features = features.of(battles)
    if se not in ("model", "sandwich", "cluster"):
        raise ValueError(f"se must be model, sandwich or cluster, got {se!r}")
    columns, mean, sd = [], np.zeros(0), np.zeros(0)
    names = list(features.names)
    if names:
        z, mean, sd = standardise(features.raw, names, source)
        columns.append(z)
    if features.side is not None:
        columns.append(features.side[:, None])
        names.append("position")
    if not columns:
        raise ValueError("no style feature and no position term to fit")
    if se == "cluster" and battles.judges is None:
        raise LeaderboardInputError(f"{source}: se='cluster' needs a judge column")
    E = np.hstack(columns)
    # model_a's score: outright wins of a plus half the ties (wins counts b's outright wins)
    a, b, y, m, ties = battles.i, battles.j, battles.m - battles.wins - 0.5 * battles.ties, battles.m, battles.ties
    judges = battles.judges if se == "cluster" else None
    if not features.names:  # the position term alone: rows of one (pair, side[, judge]) are summed (exact)
        a, b, E, y, m, ties, judges = _summed(a, b, E[:, 0], y, m, ties, judges, n)
    design = _Design(a, b, E, y, m, n)
    beta, steps = _newton(design, source)
    u = design.margins(beta)
    p = expit(u)
    hessian = design.gram(m * p * (1 - p))
    try:
        if se == "model":
            factor = cholesky(hessian)
        elif se == "sandwich":  # v_k is linear in the row's counts: summed rows give the same meat
            factor = precision_factor(hessian, design.gram(comparison_variance(p, y, m, ties)))
        else:
            factor = precision_factor(hessian, design.cluster_meat(y - m * p, judges))
    except LinAlgError:
        hint = "; try --se sandwich" if se == "cluster" else ""
        raise LeaderboardInputError(f"{source}: the {se} covariance of the style fit is singular (a model or feature "
                                    f"without residual variance{hint})") from None
    T = np.zeros((n + design.q, design.p))
    T[:n, :n - 1] = design.Q
    T[n:, n - 1:] = np.eye(design.q)
    root_all = solve_triangular(factor, T.T, trans="T")  # Y with Y'Y = T V_r T'
    cov = root_all.T @ root_all
    theta = design.Q @ beta[:n - 1]
    return StyleFit(theta=theta, coef=beta[n - 1:].copy(), names=names, cov=cov, root=root_all[:, :n],
                    mean=mean, sd=sd, se_method=se, steps=steps, position=features.position)


def _summed(a, b, side, y, m, ties, judges, n):
    """Rows with the same ordered pair, side (and judge) summed: the likelihood, its derivatives and
    both meats depend on such rows only through their sums."""
    key = (a.astype(np.int64) * n + b) * 2 + (side > 0)
    if judges is not None:
        key = key + judges.astype(np.int64) * (2 * n * n)
    keys, index = np.unique(key, return_inverse=True)
    index = index.ravel()
    total = lambda v: np.bincount(index, v, len(keys))
    pair = (keys % (2 * n * n)) // 2
    side = np.where(keys % 2 == 1, 1.0, -1.0)
    return (pair // n, pair % n, side[:, None], total(y), total(m), total(ties),
            None if judges is None else keys // (2 * n * n))


def _newton(design: _Design, source: str):
    """The MLE in reduced coordinates by Newton's method with Armijo backtracking."""
    beta = np.zeros(design.p)
    u = design.margins(beta)
    value = design.loglik(u)
    target = TOL * (1.0 + float(design.m.sum()))
    for step in range(1, MAX_STEPS + 1):
        p = expit(u)
        gradient = design.reduce(design.full_vector(design.y - design.m * p))
        hessian = design.gram(design.m * p * (1 - p))
        if step == 1:  # at theta = 0 the Hessian is the design's Gram matrix / 4: its rank is the design's
            eig = np.linalg.eigvalsh(hessian)
            if not eig[0] > RCOND * eig[-1]:
                raise LeaderboardInputError(
                    f"{source}: the style features (or the position term) do not separate from the models' scores "
                    "(collinear: e.g. a feature fixed by the pair of models, or every pair always on the same "
                    "sides); leave it out")
        if np.abs(gradient).max() <= target:
            return beta, step - 1
        try:
            direction = solve_triangular(c := cholesky(hessian), solve_triangular(c, gradient, trans="T"))
        except LinAlgError:
            break
        slope = float(gradient @ direction)
        t = 1.0
        while True:  # Armijo backtracking (an ascent: the log-likelihood is maximised)
            trial = beta + t * direction
            u_trial = design.margins(trial)
            trial_value = design.loglik(u_trial)
            if trial_value >= value + 1e-4 * t * slope:
                break
            if t == 1.0 and slope <= 1e-12 * (1.0 + abs(value)):  # the gain is below the rounding of the
                break  # log-likelihood: near the maximum, where the full Newton step is right
            t *= 0.5
            if t < 1e-12:
                break
        if t < 1e-12:
            break
        beta, u, value = trial, u_trial, trial_value
        if not math.isfinite(value) or np.abs(beta).max() > 1e3:
            break
    raise LeaderboardInputError(f"{source}: the style fit did not converge (nearly separable data: some model or "
                                "feature predicts the outcomes with certainty); leave a feature out or add votes")
