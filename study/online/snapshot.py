"""The estimator's state after a tell, as bytes (a store's checkpoint) and back, exactly.

What the next fit depends on is more than theta: the ball multipliers, whether stage 1 is
identified, the warm-start factor (a Cholesky factor with the rows added since folded in by
Woodbury terms) and, for large problems, the preconditioner kept on the data with its ski-rental
counters.  A checkpoint is all of it: every attribute of the :class:`study.simulation.estimator.Estimate`
and of its :class:`study.core.likelihood.ComparisonData` except the told rows themselves (and what
is computed from them alone), which the store keeps row by row and a reopened ranker appends again.
Restored onto an estimate holding the same rows, the next fit is bit for bit the uninterrupted one's.

The encoding is explicit, not :mod:`pickle` (a store may come from anyone, and unpickling runs
code): a JSON tree of plain values, tuples, lists, string-keyed dicts, numpy arrays (their bytes,
dtype from a short list, shape, memory order and writeability, so that BLAS takes the same path)
and objects of classes defined in :mod:`study.core` (rebuilt without calling their constructor, as
pickle does), with shared objects kept shared.  Decoding a malformed blob raises
:class:`SnapshotError`; it never imports or calls anything but those classes' ``__new__``.

A checkpoint is only as good as the code that wrote it: it carries the SHA-256 of the estimator's
source (:func:`fingerprint`), and one written by other code is not restored (the ranker refits the
history once instead).
"""
from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np

from .._util import sha256_files
from ..core.iterative import IterativeFactor
from ..core.systems import DenseInverse, Factor

MAGIC = b"study.online checkpoint 1\n"
DTYPES = {"<f8", "<f4", "<i8", "<i4", "|b1"}
# the config, the told rows, a cache, and what the refits cost (CPU seconds: a measurement of the
# process that made them, which no fit reads; a reopened ranker counts its own from zero)
SKIP_ESTIMATE = {"setting", "data", "debiased", "work", "regime_steps", "regime_cpu", "debias_cpu", "slowest",
                 "_point", "reuse_point", "large", "factor_rank"}
# _point: the margins and gradient at point_beta, recomputed by one pass; reuse_point, large and factor_rank:
# derived from the problem's size, as the setting is
# what ComparisonData computes from the told rows (and its edges) alone: rebuilt by appending them
DATA_ROWS = {"n_items", "dim", "capacity", "t", "a", "b", "X", "XX", "wins", "m", "edge_id", "_flat_a", "_flat_b",
             "_cells", "_incidence", "_dims", "_edge_index", "edge_lo", "edge_hi", "row_space_rows", "design", "_xx",
             "_rr", "_reduced_map", "_csr", "_csr_matrices", "_row_space"}  # _row_space: study.core.rowspace's cache
CLASS_PREFIX = "study.core."
# the kept factor changes kind along a path (a dense factor becomes its explicit inverse at its first
# new row): a checkpoint's kept factor, of any of these kinds, restores onto an estimate holding another
KEPT_FACTORS = (Factor, DenseInverse, IterativeFactor)
_FINGERPRINT: list = []


class SnapshotError(ValueError):
    """A checkpoint that does not decode (damaged, crafted, or written by other code)."""


def fingerprint() -> str:
    """SHA-256 of the source of the statistical core and the shared estimator: the code whose
    state a checkpoint holds."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parent.parent
        files = sorted((root / "core").rglob("*.py")) + [root / "simulation" / "estimator.py"]
        _FINGERPRINT.append(sha256_files(files, root=root))
    return _FINGERPRINT[0]


# --- encoding ------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self, data):
        self.data = data
        self.arrays: list = []  # (header entry, bytes)
        self.offset = 0
        self.seen: dict = {}  # id(object) -> its number (objects and arrays shared stay shared)
        self.keep: list = []  # keeps encoded objects alive, so that their ids stay unique

    def array(self, value: np.ndarray, scalar: bool = False) -> dict:
        key = id(value)
        if key in self.seen:
            return {"$r": self.seen[key]}
        dtype = value.dtype.str
        if dtype not in DTYPES:
            raise TypeError(f"cannot checkpoint an array of dtype {value.dtype}")
        order = "F" if value.flags.f_contiguous and not value.flags.c_contiguous else "C"
        raw = value.tobytes(order=order)
        entry = {"dtype": dtype, "shape": list(value.shape), "order": order, "offset": self.offset,
                 "writeable": bool(value.flags.writeable), "scalar": scalar}
        self.arrays.append(raw)
        self.offset += len(raw) + (-len(raw)) % 8
        number = len(self.seen)
        self.seen[key] = number
        self.keep.append(value)
        return {"$a": entry, "$id": number}

    def node(self, value):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value
        if isinstance(value, np.ndarray):
            return self.array(value)
        if isinstance(value, np.generic):
            return self.array(np.asarray(value), scalar=True)
        if type(value) is tuple:
            return {"$t": [self.node(v) for v in value]}
        if type(value) is list:
            return {"$l": [self.node(v) for v in value]}
        if type(value) is dict:
            if not all(isinstance(k, str) for k in value):
                raise TypeError("cannot checkpoint a dict with keys that are not strings")
            return {"$d": {k: self.node(v) for k, v in value.items()}}
        if value is self.data:
            return {"$data": 1}
        cls = type(value)
        if not cls.__module__.startswith(CLASS_PREFIX) or not hasattr(value, "__dict__") or hasattr(cls, "__slots__"):
            raise TypeError(f"cannot checkpoint a {cls.__module__}.{cls.__qualname__} object")
        key = id(value)
        if key in self.seen:
            return {"$r": self.seen[key]}
        number = len(self.seen)
        self.seen[key] = number
        self.keep.append(value)
        return {"$o": f"{cls.__module__}:{cls.__qualname__}", "$id": number,
                "$v": {k: self.node(v) for k, v in vars(value).items()}}


def capture(estimate, policy_state=None) -> bytes:
    """The checkpoint of ``estimate`` (and a policy's JSON state, if any), as bytes."""
    encoder = _Encoder(estimate.data)
    tree = {"fingerprint": fingerprint(),
            "estimate": {k: encoder.node(v) for k, v in vars(estimate).items() if k not in SKIP_ESTIMATE},
            "data": {k: encoder.node(v) for k, v in vars(estimate.data).items() if k not in DATA_ROWS},
            "policy": policy_state}
    header = json.dumps(tree, separators=(",", ":")).encode()
    parts = [MAGIC, struct.pack("<Q", len(header)), header]
    parts.append(b"\0" * ((-sum(map(len, parts))) % 8))
    for raw in encoder.arrays:
        parts.append(raw)
        parts.append(b"\0" * ((-len(raw)) % 8))
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------------
class _Decoder:
    def __init__(self, blob: bytes, start: int, data):
        self.blob, self.start, self.data = blob, start, data
        self.objects: dict = {}

    def array(self, entry: dict, number) -> np.ndarray:
        try:
            dtype, shape, order = entry["dtype"], [int(s) for s in entry["shape"]], entry["order"]
            offset, writeable, scalar = int(entry["offset"]), bool(entry["writeable"]), bool(entry["scalar"])
        except (KeyError, TypeError, ValueError):
            raise SnapshotError("an array entry is malformed") from None
        if dtype not in DTYPES or order not in ("C", "F") or any(s < 0 for s in shape) or offset < 0:
            raise SnapshotError(f"an array entry is malformed ({dtype!r}, shape {shape}, order {order!r})")
        count = math.prod(shape)
        size = count * np.dtype(dtype).itemsize
        begin = self.start + offset
        if begin + size > len(self.blob):
            raise SnapshotError(f"an array of shape {shape} runs past the end of the checkpoint")
        flat = np.frombuffer(self.blob, dtype=np.dtype(dtype), count=count, offset=begin)
        value = np.array(flat.reshape(shape, order=order), order=order)  # a fresh, aligned, writeable copy
        if scalar:
            if shape:
                raise SnapshotError("a scalar entry has a shape")
            value = value[()]
        else:
            value.flags.writeable = writeable
        self.objects[number] = value
        return value

    def node(self, value):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if not isinstance(value, dict) or len(value) not in (1, 2, 3):
            raise SnapshotError(f"unexpected node {str(value)[:60]!r}")
        if "$a" in value:
            return self.array(value["$a"], value.get("$id"))
        if "$r" in value:
            try:
                return self.objects[value["$r"]]
            except (KeyError, TypeError):
                raise SnapshotError(f"a reference to an unknown object {value['$r']!r}") from None
        if "$t" in value:
            return tuple(self.node(v) for v in self._list(value["$t"]))
        if "$l" in value:
            return [self.node(v) for v in self._list(value["$l"])]
        if "$d" in value:
            return {str(k): self.node(v) for k, v in self._dict(value["$d"]).items()}
        if "$data" in value:
            return self.data
        if "$o" in value:
            cls = _class(value["$o"])
            obj = cls.__new__(cls)
            self.objects[value.get("$id")] = obj
            obj.__dict__.update({str(k): self.node(v) for k, v in self._dict(value.get("$v")).items()})
            return obj
        raise SnapshotError(f"unexpected node {str(value)[:60]!r}")

    @staticmethod
    def _list(value) -> list:
        if not isinstance(value, list):
            raise SnapshotError("a sequence node is not a list")
        return value

    @staticmethod
    def _dict(value) -> dict:
        if not isinstance(value, dict):
            raise SnapshotError("a mapping node is not a JSON object")
        return value


def _class(name) -> type:
    """A class defined in study.core, by its 'module:qualname' (already imported: nothing is imported here)."""
    if not isinstance(name, str) or ":" not in name:
        raise SnapshotError(f"unexpected class name {name!r}")
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    cls = getattr(module, qualname, None) if module is not None and module_name.startswith(CLASS_PREFIX) else None
    if not isinstance(cls, type) or cls.__module__ != module_name or hasattr(cls, "__slots__"):
        raise SnapshotError(f"class {name!r} is not one of the estimator's")
    return cls


def read_header(blob: bytes) -> tuple:
    """(the JSON tree, where the arrays start) of a checkpoint; SnapshotError if malformed."""
    if not isinstance(blob, bytes) or not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
        raise SnapshotError("not a checkpoint of this version (bad magic)")
    (length,) = struct.unpack_from("<Q", blob, len(MAGIC))
    begin = len(MAGIC) + 8
    if begin + length > len(blob):
        raise SnapshotError("the checkpoint's header runs past its end")
    try:
        tree = json.loads(blob[begin: begin + length])
    except (UnicodeDecodeError, ValueError):
        raise SnapshotError("the checkpoint's header is not JSON") from None
    if not isinstance(tree, dict) or set(tree) != {"fingerprint", "estimate", "data", "policy"}:
        raise SnapshotError("the checkpoint's header has other fields than fingerprint, estimate, data, policy")
    start = begin + length
    return tree, start + (-start) % 8


def current(blob) -> bool:
    """Was checkpoint ``blob`` written by this code (:func:`fingerprint`)?"""
    try:
        return read_header(blob)[0]["fingerprint"] == fingerprint()
    except SnapshotError:
        return False


def restore(estimate, blob: bytes):
    """Put the state of checkpoint ``blob`` onto ``estimate`` (which holds the same told rows);
    returns the policy's state stored with it (None if none).  Raises :class:`SnapshotError`
    for a blob that does not decode, leaving ``estimate`` unchanged."""
    tree, start = read_header(blob)
    decoder = _Decoder(blob, start, estimate.data)
    try:
        values = {str(k): decoder.node(v) for k, v in _Decoder._dict(tree["estimate"]).items()}
        data_values = {str(k): decoder.node(v) for k, v in _Decoder._dict(tree["data"]).items()}
    except RecursionError:
        raise SnapshotError("the checkpoint nests too deeply") from None
    if set(values) & SKIP_ESTIMATE or set(data_values) & DATA_ROWS:
        raise SnapshotError("the checkpoint holds what the told rows define")
    missing = (set(vars(estimate)) - SKIP_ESTIMATE - set(values)) | (set(vars(estimate.data)) - DATA_ROWS - set(data_values))
    if missing:
        raise SnapshotError(f"the checkpoint lacks {sorted(missing)}")
    theta = values.get("theta")
    if not isinstance(theta, np.ndarray) or theta.shape != estimate.theta.shape or theta.dtype != np.float64 \
            or not np.isfinite(theta).all():
        raise SnapshotError(f"its theta is not a finite {estimate.theta.shape} float array")
    multipliers = values.get("multipliers")
    if multipliers is not None and (not isinstance(multipliers, np.ndarray) or multipliers.shape != (len(theta),)
                                    or not (multipliers >= 0.0).all()):
        raise SnapshotError("its ball multipliers are not None or n non-negative numbers")
    point_beta = values.get("point_beta")
    if point_beta is not None and (not isinstance(point_beta, np.ndarray) or point_beta.dtype != np.float64
                                   or point_beta.shape != (theta.size - theta.shape[1],)
                                   or not np.isfinite(point_beta).all()):
        raise SnapshotError("its warm-start point is not None or a finite (n - 1) d float array")
    for owner, restored in ((estimate, values), (estimate.data, data_values)):
        for name, value in restored.items():  # what a fresh estimator sets, of the same kind
            fresh = getattr(owner, name, None)
            if fresh is not None and value is not None and not isinstance(value, type(fresh)) \
                    and not (isinstance(fresh, (int, float)) and isinstance(value, (int, float, np.number))) \
                    and not (name == "factor" and isinstance(fresh, KEPT_FACTORS) and isinstance(value, KEPT_FACTORS)):
                raise SnapshotError(f"its {name} is a {type(value).__name__}, not a {type(fresh).__name__}")
    for name, value in values.items():
        setattr(estimate, name, value)
    estimate.debiased = None
    # the warm-start cache of the estimator's own last fit (margins and gradient at its point_beta)
    # is not the checkpoint's: dropped, so that the next fit rebuilds it at the restored point_beta
    # on the restored rows, as the uninterrupted history's does (kept, a writer that followed another
    # writer's checkpoint started its next fit elsewhere: same estimate to 1e-9, another path)
    estimate._point = None
    for name, value in data_values.items():
        setattr(estimate.data, name, value)
    return tree["policy"]
