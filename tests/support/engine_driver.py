"""A study driver for the tests that need a separate process (python engine_driver.py STUDY SLEEP
[cli flags]): the command line of jobs/<study>.py with the cheap stand-in replication of
engine_support (each replication sleeping SLEEP seconds), on its own embedded Ray.
With STUDY_TEST_SLOW_COMMIT=S in the environment every batch's write takes S seconds longer (a slow
disk), so that a signal can be made to arrive while the driver writes."""
import functools
import os
import sys
import time

from study import cli
from study.results import storage
from engine_support import fake_replicate

if __name__ == "__main__":
    slow = float(os.environ.get("STUDY_TEST_SLOW_COMMIT", "0"))
    if slow:
        commit = storage.commit_batch

        def slow_commit(*args, **kwargs):
            time.sleep(slow)
            return commit(*args, **kwargs)

        storage.commit_batch = slow_commit
    study, sleep = sys.argv[1], float(sys.argv[2])
    sys.exit(cli.main(study, sys.argv[3:], replicate=functools.partial(fake_replicate, sleep=sleep)))
