"""A study driver for the tests that need a separate process (python engine_driver.py STUDY SLEEP
[cli flags]): the command line of jobs/<study>.py with the cheap stand-in replication of
test_engine_support (each replication sleeping SLEEP seconds), on its own embedded Ray."""
import functools
import sys

from study import cli
from test_engine_support import fake_replicate

if __name__ == "__main__":
    study, sleep = sys.argv[1], float(sys.argv[2])
    sys.exit(cli.main(study, sys.argv[3:], replicate=functools.partial(fake_replicate, sleep=sleep)))
