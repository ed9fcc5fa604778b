"""Kernel independence, checked on the developer's machine too: the golden tables
(tests/simulation/golden.py) are compared in fresh processes under two OpenBLAS kernels other than
this machine's default (the widest two its CPU runs: SkylakeX and Haswell on an AVX-512 machine,
Haswell and Sandybridge on an AVX2 one; on ARM the generic ARMV8 kernel), and under the pinned
numerics (:mod:`study.runner.numerics`: OpenBLAS Nehalem, numpy without its SIMD loops).  A test
that depends on the last bits of one kernel fails here, not only on users' machines."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden.py"
# OpenBLAS x86-64 kernels, widest first, with the CPU flags (/proc/cpuinfo) each one needs
X86_KERNELS = (("SkylakeX", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}),
               ("Haswell", {"avx2", "fma"}),
               ("Sandybridge", {"avx"}),
               ("Nehalem", {"sse4_2"}))


def _cpu_flags() -> set:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def _kernels() -> list:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        flags = _cpu_flags()
        return [name for name, needs in X86_KERNELS if needs <= flags][:2]
    if machine in ("aarch64", "arm64"):
        return ["ARMV8"]
    return []


def _uses_openblas() -> bool:
    from threadpoolctl import threadpool_info
    import numpy  # noqa: F401

    return any(lib.get("internal_api") == "openblas" for lib in threadpool_info())


def _check(env_extra: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")}
    env.update(env_extra)
    res = subprocess.run([sys.executable, str(GOLDEN), "check"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert res.returncode == 0, f"golden tables under {env_extra}:\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
    return res.stdout


@pytest.mark.parametrize("position", [0, 1])
def test_golden_tables_hold_under_another_kernel(position):
    if not _uses_openblas():
        pytest.skip("numpy does not use OpenBLAS here: no kernel to choose")
    kernels = _kernels()
    if position >= len(kernels):
        pytest.skip(f"this CPU ({platform.machine()}) runs {len(kernels)} of the kernels tried: {kernels}")
    kernel = kernels[position]
    out = _check({"OPENBLAS_CORETYPE": kernel})
    assert f"OpenBLAS {kernel} " in out, f"OPENBLAS_CORETYPE={kernel} did not take effect:\n{out[:500]}"
    assert "0 failures" in out


def test_golden_tables_hold_under_the_pinned_numerics():
    from study.runner.numerics import pin_environment, pin_kernel

    if not _uses_openblas() or pin_kernel() is None:
        pytest.skip("no pinned numerics on this machine")
    out = _check(pin_environment())
    assert "(pinned)" in out.splitlines()[0], out[:500]
    assert "0 failures" in out
