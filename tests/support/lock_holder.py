"""Hold the study lock of OUT for SECONDS (python lock_holder.py OUT SECONDS): prints "locked" once
it holds it, or "refused: <message>" and exits 2.  Stands in for a second driver in the tests."""
import sys
import time

from study.results import storage

if __name__ == "__main__":
    out, seconds = sys.argv[1], float(sys.argv[2])
    try:
        with storage.study_lock(out, run_id="holder-run"):
            print("locked", flush=True)
            time.sleep(seconds)
    except storage.StudyLocked as exc:
        print(f"refused: {exc}", flush=True)
        sys.exit(2)
