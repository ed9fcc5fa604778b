"""BLAS on one thread: the one context every loop of small BLAS calls runs in.

The bandit core's matrices are small (per-edge Grams, a (n-1)d factorisation, dot products over the
rows): BLAS threads only cost, on a loaded machine their spinning made a 190 x 190 Cholesky
factorisation take 0.1-0.3 s instead of 1 ms, and another thread count may round differently.
"""
_CONTROLLER: list = []  # the process's ThreadpoolController, made once: inspecting the loaded
# libraries costs about 7 ms (4% of a replication at the paper's sizes if repeated for each)


def one_blas_thread():
    """A context limiting BLAS to one thread (``threadpool_limits(limits=1, user_api="blas")``)."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
