"""Sizes refused before memory is spent: each case of issue 35 in a fresh process, with the wall
time from the call to its refusal (or warning) and the process's peak RSS.

    python -m benchmarks.refusals

Before (commit 2565cad): ``Ranker(n_items=20000, dim=2, T=100)`` peaked at 6.4 GB and took 64 s to
refuse; 60,000 and 10^6 items raised MemoryError; ``fit_btl`` on 10^6 items ran for minutes with
no estimate; ``bootstrap(reps=10**9)`` ran unbounded; a 5 GB judgments file was read whole.
"""
from __future__ import annotations

import subprocess
import sys

CASES = {
    "Ranker, 20,000 items": "from study.online import Ranker; Ranker(D + '/a.sqlite', n_items=20000, dim=2, T=100)",
    "Ranker, 60,000 items": "from study.online import Ranker; Ranker(D + '/b.sqlite', n_items=60000, dim=2, T=100)",
    "Ranker, 10^6 items": "from study.online import Ranker; Ranker(D + '/c.sqlite', n_items=10**6, dim=2, T=100)",
    "fit_btl, 10^6 items, 200 rows": "study.fit_btl(I, J, X, W, 5, n_items=10**6)",
    "bootstrap, reps=10^9": "study.bootstrap(I, J, X, W, 5, n_items=50, reps=10**9)",
    "bootstrap, 10^5 items, reps=10^5": "study.bootstrap(I, J, X, W, 5, n_items=10**5, reps=10**5)",
    "debias, 20,000 items (dense)": ("n = 20000; r = np.arange(n - 1); study.debias(np.zeros((n, 2)), np.r_[r, r], "
                                     "np.r_[r + 1, r + 1], np.r_[np.ones((n - 1, 2)), -np.ones((n - 1, 2))], "
                                     "np.ones(2 * (n - 1)), 2)"),
    "judgments file of 5 GB": "from study.llm.byo import read_judgments; read_judgments(D + '/huge.csv')",
}
CHILD = """
import resource, shutil, tempfile, time, warnings
import numpy as np
import study
warnings.simplefilter("error", RuntimeWarning)  # a warning stops the call: nothing runs after it
D = tempfile.mkdtemp()
with open(D + '/huge.csv', 'wb') as handle:
    handle.truncate(5 * 2 ** 30)  # sparse: no disk used
rng = np.random.default_rng(0)
I = rng.integers(0, 50, 200); J = (I + 1 + rng.integers(0, 3, 200)) % 50
X = rng.normal(1.0, 0.5, (200, 2)); W = rng.binomial(5, 0.5, 200)
start = time.perf_counter()
try:
    {code}
    outcome = "ran (not refused)"
except (ValueError, RuntimeWarning) as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:110]}"
seconds = time.perf_counter() - start
shutil.rmtree(D)
print(repr((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, outcome)))
"""


def main() -> None:
    print(f"{'case':34s} {'seconds':>8s} {'peak RSS':>9s}  outcome")
    for name, code in CASES.items():
        res = subprocess.run([sys.executable, "-c", CHILD.replace("{code}", code)], capture_output=True, text=True,
                             timeout=600)
        try:
            seconds, rss, outcome = eval(res.stdout.strip().splitlines()[-1])  # noqa: S307 -- our own child's repr
        except (IndexError, SyntaxError):
            print(f"{name:34s} failed: {res.stderr[-300:]}")
            continue
        print(f"{name:34s} {seconds:8.3f} {rss:6.0f} MB  {outcome}")


if __name__ == "__main__":
    main()
