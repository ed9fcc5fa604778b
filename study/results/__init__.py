"""Stored results: the checksummed Parquet of a study directory (:mod:`.storage`), the figures
(:mod:`.figures`) and the summary table (:mod:`.summary`), all read from the files alone.

:func:`load` is the public way to read a study's table::

    import study
    df = study.load("outputs", "regret")               # trajectories, one row per replication and step
    ci = study.load("outputs", "coverage", "intervals")
"""
from .errors import DamagedPart, DuplicateKeys, PlantedLink, StorageError, StudyLocked, WriteFailed
from .storage import load, stored_keys, verify

__all__ = ["load", "stored_keys", "verify", "StorageError", "DamagedPart", "DuplicateKeys", "StudyLocked",
           "PlantedLink", "WriteFailed"]
