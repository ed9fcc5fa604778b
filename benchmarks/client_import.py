"""How long a judge's process takes to import the client: ``from study.online import Client`` in a
fresh interpreter, ``--runs`` times (median and range), beside ``import numpy`` alone (its floor)
and ``import study.online.ranker`` (what the client spares a judge).  Not a test (timings depend
on the machine); the import's content is tested in tests/online/test_service_light_client.py.

    python -m benchmarks.client_import [--runs 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = {"import numpy": "import numpy", "from study.online import Client": "from study.online import Client",
              "import study.online.ranker": "import study.online.ranker"}


def seconds(statement: str, runs: int) -> list:
    """Wall seconds of ``python -c statement`` (interpreter start included), ``runs`` times."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True, env=env)
        out.append(time.perf_counter() - start)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per statement (default 15)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} fresh interpreters each")
    baseline = statistics.median(seconds("pass", args.runs))
    print(f"  {'python -c pass':34s} median {baseline:.3f} s")
    for label, statement in STATEMENTS.items():
        times = seconds(statement, args.runs)
        print(f"  {label:34s} median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
