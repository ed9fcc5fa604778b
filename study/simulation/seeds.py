"""Seeds: every random stream of a replication derives from one ``numpy.random.SeedSequence``.

A replication's seed depends only on the root seed, the study's seed namespace, the base setting
name and the replication index (:func:`replication_seed`), never on the worker count or the order of
work; every method (and every M of the M-sweep) of replication r sees the same environment (common
random numbers).  A policy's private generator (:func:`policy_generator`) extends the
replication's policy seed by a stable hash of the method name, so it never touches the shared
streams.  ``hash()`` is never used: it is salted per process.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..core import _validate as check


def stable_int(text: str) -> int:
    """A deterministic 32-bit integer for a string (first 4 bytes of its SHA-256), never hash()."""
    return int.from_bytes(hashlib.sha256(str(text).encode("utf-8")).digest()[:4], "big")


def seed_sequence(seed) -> np.random.SeedSequence:
    """``seed`` as a SeedSequence: a SeedSequence as is, or a non-negative integer."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    try:
        value = check.integer("seed", seed, low=0)
    except ValueError:
        raise ValueError(f"seed must be a non-negative integer or a numpy SeedSequence, got {seed!r}") from None
    return np.random.SeedSequence(value)


def replication_seed(root_seed: int, namespace: str, setting: str, rep: int) -> int:
    """The seed of replication ``rep`` of base setting ``setting`` in seed namespace ``namespace``.

    Independent of method and M: every method (and every M of the sweep) sees the same
    environment in replication ``rep``."""
    ss = np.random.SeedSequence(int(root_seed), spawn_key=(stable_int(namespace), stable_int(setting), int(rep)))
    return int(ss.generate_state(1, np.uint64)[0]) & (2 ** 63 - 1)


def policy_generator(policy_seed, name: str) -> np.random.Generator:
    """The policy-private Generator of one replication: the replication's policy seed (the
    SeedSequence child behind the shared uniforms, or an int) extended by a stable hash of the
    method name.  It never touches the shared uniforms' stream."""
    key = stable_int(name)
    if policy_seed is None:
        return np.random.default_rng()
    if isinstance(policy_seed, np.random.SeedSequence):
        ss = np.random.SeedSequence(policy_seed.entropy, spawn_key=tuple(policy_seed.spawn_key) + (key,),
                                    pool_size=policy_seed.pool_size)
    else:
        ss = np.random.SeedSequence(int(policy_seed), spawn_key=(key,))
    return np.random.default_rng(ss)
