"""Benchmarks (not tests, not installed with the package): run from the repository's root, e.g.
``python -m benchmarks.bench --scale``.  Each compares against a reference in the same run and
prints ratios.  :mod:`benchmarks.cores` reads the older cores they compare with from git, at named commits."""
