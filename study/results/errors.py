"""The errors of a study directory: each names the file it concerns, in one line."""
from __future__ import annotations

RECOVERY_COMMAND = "python -m study.results"


class StorageError(RuntimeError):
    """A stored file cannot be trusted or read; the message names the file (one line)."""


class DamagedPart(StorageError):
    """A part does not match its commit record (or is missing, or its record is unreadable)."""


class DuplicateKeys(StorageError):
    """The same replication key is stored in two committed parts."""


class StudyLocked(StorageError):
    """Another process holds the study directory's lock."""


class PlantedLink(StorageError):
    """A path of the study directory that must be a plain file or directory is a symbolic link
    (or a hard link, or another kind of file): it is never followed, and the operation is refused."""


class WriteFailed(StorageError):
    """A file of the study directory cannot be written (a full disk, a lost permission, ...)."""


def recovery_hint(out, study) -> str:
    return (f"run `{RECOVERY_COMMAND} drop-damaged {out} {study}`, then rerun the same command to "
            "recompute those replications")
