"""The bandit core as it was at commit 796e5ac (dense reduced-coordinate design and Hessian),
frozen and kept only as a reference: ``python -m benchmarks.bench --scale`` times it beside the current
core, and ``tests/test_agreement.py`` checks that the current core's fits, choices and summaries
agree with it on paired replications.  Nothing else imports it, and it is not part of the core
source hash (results computed with it are never stored).

Only edit to keep it importable; its numbers are the point of comparison.
"""
