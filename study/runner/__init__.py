"""The Ray runner: fan the replications of every method x setting out as remote tasks, gather them
into checksummed Parquet (:mod:`study.results`), resume.

Its modules, one role each (after benchopt's runner):

* :mod:`.catalogue` -- the studies and their defaults, seed namespaces;
* :mod:`.plan` -- :func:`make_plan`: a validated study, its cells and seeds;
* :mod:`.fingerprint` -- what fixes the numbers, the core source hash, the check of stored results;
* :mod:`.worker` -- one task: a batch of replications as Arrow tables;
* :mod:`.batching` -- how replications are cut into tasks;
* :mod:`.reuse` -- copying identical cells stored by another study;
* :mod:`.driver` -- :func:`run_study` and its :class:`RunOptions`;
* :mod:`.writer`, :mod:`.progress`, :mod:`.manifest` -- committing finished work, terminal output
  and signals, the run record;
* :mod:`.rayconn` -- joining or starting Ray;
* :mod:`.panels` -- the ranking-diagram snapshots of a replay study.
"""
from .catalogue import (BASELINE_STUDIES, DEFAULT_BASELINE_STUDIES, DEFAULT_SEED, LLM_WARMUP_STUDIES, MAX_REPS,
                        REPLAY_STUDIES, STUDIES, STUDY_NAMES, WARMUP_STUDIES, StudyDefaults, seed_namespace)
from .driver import RunOptions, StudyReport, run_study
from .fingerprint import ConfigMismatch, check_stored, core_source_hash
from .plan import Cell, Plan, make_plan
from .rayconn import connect, max_local_cpus

__all__ = ["BASELINE_STUDIES", "DEFAULT_BASELINE_STUDIES", "WARMUP_STUDIES", "LLM_WARMUP_STUDIES", "DEFAULT_SEED", "MAX_REPS", "REPLAY_STUDIES", "seed_namespace", "STUDIES", "STUDY_NAMES", "StudyDefaults",
           "RunOptions", "StudyReport", "run_study", "ConfigMismatch", "check_stored", "core_source_hash",
           "Cell", "Plan", "make_plan", "connect", "max_local_cpus"]
