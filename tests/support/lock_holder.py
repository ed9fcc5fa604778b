"""Hold the study lock of OUT for SECONDS (python lock_holder.py OUT SECONDS [--together]): prints
"locked" once it holds it, or "refused: <message>" and exits 2.  Stands in for a second driver in
the tests.  With --together it first prints "ready" and waits for a line on stdin before it asks for
the lock (so that two holders ask at the same moment however slowly each one started), and holds
the lock until its stdin closes (at most SECONDS)."""
import sys
import threading
import time

from study.results import storage

if __name__ == "__main__":
    out, seconds = sys.argv[1], float(sys.argv[2])
    together = "--together" in sys.argv[3:]
    released = threading.Event()
    if together:
        print("ready", flush=True)
        sys.stdin.readline()
        # stdin closed by the test: release the lock (a daemon thread, so that a refused holder exits at once)
        threading.Thread(target=lambda: (sys.stdin.read(), released.set()), daemon=True).start()
    try:
        with storage.study_lock(out, run_id="holder-run"):
            print("locked", flush=True)
            if together:
                released.wait(seconds)
            else:
                time.sleep(seconds)
    except storage.StudyLocked as exc:
        print(f"refused: {exc}", flush=True)
        sys.exit(2)
