"""Tests that drive a votes replay step by step run, as ``study.votes.replay`` does, with BLAS on
one thread (on a loaded machine BLAS threads make a small factorisation 100x slower)."""
import pytest

from study.core.threads import one_blas_thread


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with one_blas_thread():
        yield
