"""What a replication's numbers depend on besides its seed, and the pin that makes it the same on
every x86-64 machine.

The same seed gives the same *draws* everywhere (numpy's generators are bit-exact by design), but
the arithmetic on them is done by code that the process picks at start-up from the CPU it runs on:

* **OpenBLAS** (numpy's and scipy's BLAS/LAPACK) loads one set of kernels per CPU family
  (``Haswell``, ``SkylakeX``, ``Zen``, ...); kernels of different vector widths sum in different
  orders, so results differ in the last bits (about 1e-16 relative per product);
* **numpy** dispatches its own loops (``exp``, ``log``, reductions) to the widest SIMD extension
  the CPU has (``X86_V3``, ``X86_V4``, ``AVX512_ICL``, ...), with the same effect.

An estimator refitted at every step carries those bits forward, and a near-tie between two items
can then be decided the other way, after which a replication follows another path (a valid draw of
the same experiment, but not the same numbers).  :func:`numerics` records what a process uses;
:func:`numerics_key` names it in manifests, so that a study whose replications came from
different kernels says so.

**The pin** (:func:`pin_environment`): OpenBLAS's ``Nehalem`` kernels (SSE4.2 -- x86-64-v2, the
baseline numpy itself requires) and numpy's dispatch switched off above its baseline
(``NPY_DISABLE_CPU_FEATURES``), set in the environment *before* numpy is imported (the job
scripts re-execute themselves: :func:`ensure_pinned`) and handed to every Ray worker.  Kernels of
these families use fixed block sizes (OpenBLAS ``driver/others/parameter.c``: no cache-size
probing for Nehalem and later), and the replications run single-threaded, so the same code does
the same arithmetic on every x86-64 CPU: a pinned run reproduces a pinned reference bit for bit
given the same versions of numpy, scipy, OpenBLAS and the C library.  On 64-bit ARM the pin
selects OpenBLAS's generic ``ARMV8`` kernels: reproducible across ARM machines, not equal to
x86-64 bits.  docs/core.md, "Reproducibility", states what was measured.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys

PIN_VARIABLE = "STUDY_PIN_NUMERICS"
"""Set to ``1`` (by ``--pin-numerics`` or by the user) to ask for the pinned numerics."""

PIN_KERNELS = {"x86_64": "Nehalem", "amd64": "Nehalem", "aarch64": "ARMV8", "arm64": "ARMV8"}
"""The OpenBLAS kernel of the pin, by ``platform.machine()`` (lower case)."""

_CACHE: dict = {}


def _numpy_dispatch() -> tuple:
    """(numpy's dispatch targets, i.e. the SIMD extensions above its compiled baseline that this
    numpy build can use; the CPU features this process found and has not been told to ignore)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return tuple(__cpu_dispatch__), __cpu_features__


def _numpy_simd() -> tuple:
    """numpy's dispatched SIMD extensions in use (above its compiled baseline), sorted."""
    targets, found = _numpy_dispatch()
    return tuple(sorted(f for f in targets if found.get(f)))


def _blas_libraries() -> list:
    """Every BLAS/LAPACK library loaded in this process (numpy's and scipy's), as threadpoolctl sees it."""
    import numpy  # noqa: F401 -- loads numpy's BLAS
    import scipy.linalg  # noqa: F401 -- loads scipy's (a separate OpenBLAS in the wheels)
    from threadpoolctl import threadpool_info

    libraries = []
    for lib in threadpool_info():
        if lib.get("user_api") != "blas":
            continue
        libraries.append({"library": lib.get("internal_api"), "file": os.path.basename(lib.get("filepath", "")),
                          "version": lib.get("version"), "kernel": lib.get("architecture"),
                          "threading": lib.get("threading_layer")})
    return sorted(libraries, key=lambda lib: lib["file"])


def numerics() -> dict:
    """What this process computes with: the machine, the C library (its libm), numpy's and scipy's
    versions, every BLAS library
    (name, file, version, the kernel in use), numpy's SIMD extensions in use, whether the pin is in
    effect, and :func:`numerics_key` of it all (``key``).  Computed once per process.

    Examples
    --------
    >>> info = numerics()
    >>> sorted(info) == ['blas', 'key', 'libc', 'machine', 'numpy', 'numpy_simd', 'pinned', 'python', 'scipy']
    True
    """
    if not _CACHE:
        import numpy
        import scipy

        info = {"machine": platform.machine(), "python": platform.python_version(),
                "libc": " ".join(platform.libc_ver()).strip() or None, "numpy": numpy.__version__,
                "scipy": scipy.__version__, "blas": _blas_libraries(), "numpy_simd": list(_numpy_simd())}
        info["pinned"] = pin_in_effect(info)
        info["key"] = numerics_key(info)
        _CACHE.update(info)
    return dict(_CACHE)


def numerics_key(info: dict) -> str:
    """A short name of everything in ``info`` that decides the last bits of a result (machine,
    versions, BLAS kernels, numpy SIMD): two processes with the same key compute the same numbers."""
    decisive = {k: info.get(k) for k in ("machine", "libc", "numpy", "scipy", "numpy_simd")}
    decisive["blas"] = [(lib["library"], lib["version"], lib["kernel"]) for lib in info.get("blas", [])]
    return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:12]


def describe(info: dict) -> str:
    """One line: the BLAS kernels and numpy SIMD of ``info`` (e.g. ``OpenBLAS SkylakeX (0.3.30,
    0.3.31), numpy SIMD X86_V3 X86_V4, x86_64``), for warnings."""
    kernels: dict = {}
    for lib in info.get("blas", []):
        kernels.setdefault((lib["library"], lib["kernel"]), []).append(str(lib["version"]))
    blas = ", ".join(f"{'OpenBLAS' if name == 'openblas' else name} {kernel} ({', '.join(versions)})"
                     for (name, kernel), versions in kernels.items()) or "no BLAS found"
    simd = " ".join(info.get("numpy_simd") or []) or "baseline only"
    return f"{blas}, numpy SIMD {simd}, {info.get('machine')}{' (pinned)' if info.get('pinned') else ''}"


def pin_kernel(machine: str | None = None) -> str | None:
    """The OpenBLAS kernel of the pin on ``machine`` (default: this one); None where there is none."""
    return PIN_KERNELS.get((machine or platform.machine()).lower())


def pin_environment() -> dict:
    """The environment variables of the pin on this machine (to be set before numpy loads).

    Raises
    ------
    RuntimeError
        This machine has no pin (not x86-64 or 64-bit ARM).
    """
    # every dispatch target of this numpy build, whether or not this CPU has it: disabling one the CPU
    # lacks is allowed (numpy refuses only to *enable* those), so one value serves every node
    kernel = pin_kernel()
    if kernel is None:
        raise RuntimeError(f"no pinned numerics for machine {platform.machine()!r} (x86-64 and 64-bit ARM have one)")
    return {PIN_VARIABLE: "1", "OPENBLAS_CORETYPE": kernel, "NPY_DISABLE_CPU_FEATURES": " ".join(_numpy_dispatch()[0]),
            "MKL_CBWR": "COMPATIBLE"}  # MKL's own reproducibility mode, for a numpy built on MKL


def pin_in_effect(info: dict) -> bool:
    """Does ``info`` (:func:`numerics`) run the pin: every BLAS an OpenBLAS on the pinned kernel, no
    numpy SIMD above the baseline?"""
    kernel = pin_kernel(info.get("machine"))
    libraries = info.get("blas") or []
    return (kernel is not None and bool(libraries) and not info.get("numpy_simd")
            and all(lib["library"] == "openblas" and str(lib["kernel"]).lower() == kernel.lower()
                    for lib in libraries))


def pin_requested() -> bool:
    """Has the user asked for the pin through the environment (``STUDY_PIN_NUMERICS=1``)?"""
    return os.environ.get(PIN_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def ensure_pinned(argv: list | None = None) -> dict:
    """Make this process run the pin: if it does not yet, re-execute the same command line
    (``sys.orig_argv``, or ``argv``) with :func:`pin_environment` set, so that numpy and OpenBLAS
    load with it.  Returns :func:`numerics` once the pin is in effect.

    Raises
    ------
    RuntimeError
        The pin cannot take effect here: the variables are set and yet numpy or its BLAS ignores
        them (e.g. a numpy built on MKL or Apple Accelerate), or this machine has no pin.
    """
    info = numerics()
    if info["pinned"]:
        return info
    wanted = pin_environment()
    if all(os.environ.get(k) == v for k, v in wanted.items()):
        raise RuntimeError(f"the pinned numerics did not take effect: this process computes with {describe(info)} "
                           f"although {', '.join(f'{k}={v!r}' for k, v in wanted.items())} are set (the pin needs "
                           "numpy and scipy wheels with OpenBLAS)")
    command = list(argv) if argv is not None else list(getattr(sys, "orig_argv", [sys.executable] + sys.argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + command[1:], {**os.environ, **wanted})
    raise AssertionError("unreachable")  # pragma: no cover


def apply_pin(flag: bool, command_line: bool) -> None:
    """The pin for a job: nothing unless asked for (``flag``, i.e. ``--pin-numerics``, or
    ``STUDY_PIN_NUMERICS=1``) and not yet in effect; else :func:`ensure_pinned` re-executes the
    command (only a process's own ``command_line`` may be).

    Raises
    ------
    ValueError
        The pin cannot be applied: called from Python after numpy loaded, or it does not take
        effect on this machine (the message says why and what to set instead).
    """
    if not (flag or pin_requested()) or numerics()["pinned"]:
        return
    if not command_line:
        raise ValueError("this Python process loaded numpy without the pin; start it with the pin's environment ("
                         + ", ".join(f"{k}={v!r}" for k, v in pin_environment().items())
                         + ") or run a job script, which sets it itself")
    try:
        ensure_pinned()
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None


def worker_environment() -> dict:
    """The environment variables a Ray worker must get for the numerics of this process: the pin's
    when it is in effect, else none."""
    return pin_environment() if numerics()["pinned"] else {}
