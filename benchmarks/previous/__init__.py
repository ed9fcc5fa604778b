"""The core as it was at commit 549859d, frozen by ``python -m benchmarks.freeze 549859d`` (git archive of
``study/core`` and ``study/simulation/estimator.py``, see :mod:`benchmarks.freeze`): the reference of
``python -m benchmarks.bench --scale --long`` (current core against this one in the same run) and of
``tests/core/test_agreement.py``'s long-horizon pairing.  ``benchmarks/legacy`` holds an older core
(commit 796e5ac).  Nothing in the package imports it.

Only regenerate it with the command above; its numbers are the point of comparison.
"""
COMMIT = "549859d"
