"""The core as it was at commit 73dd308 (before the long-horizon solver of issue 16), frozen: the
reference of ``python -m benchmarks.bench --scale`` (current core against this one in the same run)
and of ``tests/core/test_agreement.py``'s long-horizon pairing.  ``benchmarks/legacy`` holds the
core before that (commit 796e5ac).  Nothing in the package imports it.

Only edit to keep it importable; its numbers are the point of comparison.
"""
