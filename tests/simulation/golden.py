"""The golden tables: every built-in method on Settings A and B (T = 60, T0 = 24, CIs every 10
steps, seeds 3 and 11), stored in ``tests/data/golden_<commit>_{trajectory,intervals}.parquet`` and
compared with a fresh run in a way that survives another BLAS kernel, another SIMD level or
another CPU, while still catching any change of behaviour.

How two runs are compared (:func:`compare`), replication by replication:

1. **Decisions** (``major``, ``other``, ``explored``, ``before_phi``) must be identical, step by
   step, up to the first step where they differ.  A divergence is accepted only at a **near-tie**:
   the fresh run records the margin of every decision it takes (:mod:`study.core.decisions`: the
   gap between an argmax's two best scores, or between a condition estimate and its threshold,
   relative to their size); the smallest margin noted at the diverging step or at the end of the
   step before it (where the estimate that step decides on was fitted) must be below
   ``MARGIN_TOL``.  The report names the step, the decision and its margin; the rest of that
   replication follows another path and is not compared.  A divergence at a clear margin fails.
2. **Values** (regret, error, estimates, standard errors, bounds) before any divergence must agree
   within ``RTOL`` relative, ``ATOL`` absolute (``numpy.testing.assert_allclose``); ``covered``
   may differ only where the truth lies within that tolerance of a bound.

How the tolerances were chosen.  Across OpenBLAS's Haswell, SkylakeX, Sandybridge, Zen and Prescott
kernels, with and without numpy's AVX-512 loops (measured on the 9e073f4 tables: every choice
identical), the largest differences were 3.8e-7 relative in ``rel_error`` (stage-1 fits, solved
to the KKT tolerance 1e-11 x (1 + comparisons) with a tie-break of curvature 1e-4: their
flat directions move by up to ~1e-7), 4.7e-11 in the CI estimates and 1e-13 in the regrets (sums
of O(1) products, absolute).  ``RTOL = 1e-5`` is 25x the largest; ``ATOL = 1e-9`` covers values
that are zero in one run and 1e-16 in the other.  A decision cannot flip unless the values it is
taken on move by its margin, so ``MARGIN_TOL = RTOL``: a decision with a larger margin that is
taken differently is a change of behaviour, not rounding.

Regenerate (after showing statistical agreement of a change that moves the numbers; README,
"Reference outcome"), under the pinned numerics so that the file is the same on every x86-64
machine::

    python tests/simulation/golden.py write      # re-executes itself with the pin; replaces the files

``python tests/simulation/golden.py check`` compares a fresh run with the stored tables and prints
one line per replication that diverged at a near-tie (exit 1 on a failure); the kernel test runs
it under two OpenBLAS kernels (``tests/simulation/test_kernels.py``).
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SETTINGS = ("A", "B")
SEEDS = (3, 11)
RUN = {"T": 60, "T0": 24, "ci_every": 10}
DECISIONS = ("major", "other", "explored", "before_phi")
RTOL, ATOL = 1e-5, 1e-9
MARGIN_TOL = RTOL


def golden_files() -> tuple:
    """(trajectory, intervals) paths of the one stored golden set."""
    found = sorted(DATA.glob("golden_*_trajectory.parquet"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one golden table set in {DATA}, found {[p.name for p in found]}")
    return found[0], Path(str(found[0]).replace("_trajectory", "_intervals"))


def load_golden() -> tuple:
    trajectory, intervals = golden_files()
    return pd.read_parquet(trajectory), pd.read_parquet(intervals)


@dataclass
class Run:
    """A fresh run of one method on one setting: its tables and, per seed, {step: (margin, what)}."""

    trajectory: pd.DataFrame
    intervals: pd.DataFrame
    margins: dict


def run(setting: str, method: str) -> Run:
    """The tables of ``method`` on ``setting`` for :data:`SEEDS`, with every decision's margin."""
    import study
    from study.core import decisions

    rows, ints, margins = [], [], {}
    for seed in SEEDS:
        with decisions.recording() as log:
            frames = study.run_replication(setting, method, seed, **RUN).to_frame()
        margins[seed] = log.margins()
        for frame, out in ((frames["trajectory"], rows), (frames["intervals"], ints)):
            frame.insert(0, "seed", seed)
            out.append(frame)
    return Run(pd.concat(rows, ignore_index=True), pd.concat(ints, ignore_index=True), margins)


@dataclass
class Comparison:
    """What :func:`compare` found: ``failures`` (each a sentence; none when the runs agree) and
    ``divergences`` (near-ties decided the other way: each names the replication, step and decision)."""

    failures: list = field(default_factory=list)
    divergences: list = field(default_factory=list)


def _first_divergence(got: pd.DataFrame, want: pd.DataFrame):
    """The first step t whose decisions differ (None if none), and the columns that differ there."""
    differ = np.zeros(len(want), dtype=bool)
    for column in DECISIONS:
        if column in want.columns:
            differ |= got[column].to_numpy() != want[column].to_numpy()
    if not differ.any():
        return None, []
    k = int(np.argmax(differ))
    return int(want["t"].iloc[k]), [c for c in DECISIONS if c in want.columns and got[c].iloc[k] != want[c].iloc[k]]


def _near_tie(margins: dict, t: int):
    """(margin, what) of the closest decision at step t or at the end of step t - 1, or None."""
    candidates = [margins[s] for s in (t - 1, t) if s in margins]
    return min(candidates) if candidates else None


def _values_agree(label, got: pd.DataFrame, want: pd.DataFrame, skip=()) -> list:
    problems = []
    for column in want.columns:
        if column in skip or column in DECISIONS or column == "covered":
            continue
        a, b = got[column].to_numpy(), want[column].to_numpy()
        if b.dtype.kind in "fc":
            try:
                np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=RTOL, atol=ATOL, equal_nan=True)
            except AssertionError as exc:
                detail = " ".join(line.strip() for line in str(exc).splitlines() if "Max" in line)
                problems.append(f"{label}: column {column!r} differs beyond rtol={RTOL:g}, atol={ATOL:g} ({detail})")
        elif not np.array_equal(a.astype(b.dtype), b):
            problems.append(f"{label}: column {column!r} differs")
    return problems


def _covered_agree(label, got: pd.DataFrame, want: pd.DataFrame) -> list:
    if "covered" not in want.columns:
        return []
    differ = got["covered"].to_numpy() != want["covered"].to_numpy()
    truth = want["truth"].to_numpy(float)
    distance = np.minimum(abs(truth - want["lower"].to_numpy(float)), abs(truth - want["upper"].to_numpy(float)))
    clear = differ & (distance > RTOL * np.maximum(1.0, abs(truth)) + ATOL)
    return [f"{label}: 'covered' differs at {int(clear.sum())} CIs whose bound is not within the tolerance "
            "of the truth"] if clear.any() else []


def compare(setting: str, method: str, fresh: Run, golden: tuple) -> Comparison:
    """Compare a fresh run with the golden tables of ``setting``/``method`` (module docstring)."""
    result = Comparison()
    stored_traj, stored_ints = (g[(g.setting == setting) & (g.method == method)].drop(columns=["setting", "method"])
                                for g in golden)
    if stored_traj.empty:
        result.failures.append(f"{setting}/{method}: no golden rows (regenerate the golden tables)")
        return result
    for frame, stored, what in ((fresh.trajectory, stored_traj, "trajectory"),
                                (fresh.intervals, stored_ints, "intervals")):
        missing = [c for c in stored.columns if c not in frame.columns]
        if missing:
            result.failures.append(f"{setting}/{method}: the {what} frame lost the columns {missing}")
    if result.failures:
        return result
    for seed in SEEDS:
        label = f"{setting}/{method} seed {seed}"
        got = fresh.trajectory[fresh.trajectory.seed == seed].reset_index(drop=True)
        want = stored_traj[stored_traj.seed == seed].reset_index(drop=True)
        if len(got) != len(want) or not np.array_equal(got["t"].to_numpy(), want["t"].to_numpy()):
            result.failures.append(f"{label}: {len(got)} steps, the golden table has {len(want)}")
            continue
        t_div, columns = _first_divergence(got, want)
        if t_div is not None:
            tie = _near_tie(fresh.margins[seed], t_div)
            if tie is None or tie[0] > MARGIN_TOL:
                noted = "no decision margin was noted there" if tie is None else \
                    f"its closest decision ({tie[1]}) had margin {tie[0]:.3g} > {MARGIN_TOL:g}"
                result.failures.append(f"{label}: {', '.join(columns)} differ at t = {t_div} and {noted}: "
                                       "a change of behaviour, not rounding")
                continue
            result.divergences.append(f"{label}: {', '.join(columns)} differ from t = {t_div} on, where the "
                                      f"decision '{tie[1]}' was a near-tie (margin {tie[0]:.3g} <= {MARGIN_TOL:g}); "
                                      f"the {len(want) - t_div + 1} steps from there follow another path and are "
                                      "not compared")
            keep = want["t"].to_numpy() < t_div
            got, want = got[keep].reset_index(drop=True), want[keep].reset_index(drop=True)
        result.failures += _values_agree(label, got, want)
        got_i = fresh.intervals[fresh.intervals.seed == seed]
        want_i = stored_ints[stored_ints.seed == seed]
        if t_div is not None:
            got_i, want_i = got_i[got_i.t < t_div], want_i[want_i.t < t_div]
        got_i, want_i = got_i.reset_index(drop=True), want_i.reset_index(drop=True)
        if len(got_i) != len(want_i) or not (got_i[["t", "item", "dim"]].to_numpy()
                                             == want_i[["t", "item", "dim"]].to_numpy()).all():
            result.failures.append(f"{label}: CIs at other steps than the golden table's "
                                   f"({sorted(set(got_i.t))} vs {sorted(set(want_i.t))})")
            continue
        result.failures += _values_agree(label + " intervals", got_i, want_i)
        result.failures += _covered_agree(label + " intervals", got_i, want_i)
    return result


def check(methods=None) -> int:
    """Compare every setting x method with the stored tables; print the divergences and failures."""
    import study
    from study.runner.numerics import describe, numerics

    golden = load_golden()
    failures = 0
    print(f"golden tables {golden_files()[0].name}; computing with {describe(numerics())}")
    for setting in SETTINGS:
        for method in methods or study.ALL_METHODS:
            result = compare(setting, method, run(setting, method), golden)
            for line in result.divergences:
                print(f"near-tie: {line}")
            for line in result.failures:
                print(f"FAILED: {line}")
            failures += len(result.failures)
    print(f"{failures} failures")
    return 1 if failures else 0


def write() -> int:
    """Regenerate the golden tables under the pinned numerics, named after the current commit."""
    import study
    from study.runner.numerics import ensure_pinned

    ensure_pinned()  # re-executes this script with the pin if it is not in effect
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    tables = {"trajectory": [], "intervals": []}
    for setting in SETTINGS:
        for method in study.ALL_METHODS:
            fresh = run(setting, method)
            for what, frame in (("trajectory", fresh.trajectory), ("intervals", fresh.intervals)):
                frame.insert(0, "method", method)
                frame.insert(0, "setting", setting)
                tables[what].append(frame)
    for old in DATA.glob("golden_*.parquet"):
        old.unlink()
    for what, frames in tables.items():
        path = DATA / f"golden_{commit}_{what}.parquet"
        pd.concat(frames, ignore_index=True).to_parquet(path, index=False)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("check", "write"):
        print("usage: python tests/simulation/golden.py {check [METHOD ...] | write}", file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[2:] or None) if sys.argv[1] == "check" else write())
