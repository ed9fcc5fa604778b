"""``python -m study.online verify FILE``: a store checked whole, without changing it.

Everything an open checks (:mod:`study.online.verify`), and more: SQLite's full
``integrity_check``, every ask's saved generator state, the checkpoint decoded and restored onto
the told rows with the tells after it refitted (the stored estimate must be the one they reach,
bit for bit, as every open of the store checks) and, with ``replay=True``, the whole history
refitted (the estimator alone: the policy is not needed) with the stored estimate and checkpoint
compared bit for bit to the refitted ones.  Without ``replay`` the outcomes told before the
checkpoint are checked as rows (types, ranges, order), not as the source of the checkpoint: the
summary says so.
"""
from __future__ import annotations

import json

import numpy as np

from ..core.threads import one_blas_thread
from ..simulation.seeds import policy_generator
from . import snapshot
from .state import LoopState
from .store import FORMAT, Store, StoreError
from .verify import check_integrity, open_store, refuse


def verify_store(path, *, replay: bool = False) -> dict:
    """Check the store at ``path`` whole (module docstring); returns a summary (format, store id,
    counts, checkpoint, what was checked).  Raises :class:`study.online.StoreError` naming the
    file and the first offending row, or :class:`study.online.StoreFileError`."""
    store = Store(path, create=False, readonly=True)
    try:
        with store.read() as conn:
            opened = open_store(conn, path, quick_check=False)
            if opened is None:
                raise StoreError(f"{path}: an empty SQLite file, not a ranker store")
            check_integrity(conn, path)
            config = opened.config
            generator = policy_generator(config.policy_seed(), config.policy)
            for ask_id, text in conn.execute("SELECT id, rng_state FROM asks ORDER BY id"):
                try:
                    generator.bit_generator.state = json.loads(text)
                except (TypeError, ValueError, KeyError) as exc:
                    raise refuse(path, f"asks row {ask_id}", f"rng_state is not a state of the policy's generator "
                                                             f"({type(exc).__name__}: {exc})") from None
            counts = Store.counts(conn)
            seq, blob = opened.checkpoint
    finally:
        store.close()
    ledger = opened.ledger
    summary = {"path": str(path), "format": opened.format, "store_id": opened.store_id, "config": config,
               "counts": counts, "checkpoint_seq": seq, "checkpoint_bytes": 0 if blob is None else len(blob),
               "checkpoint_current": None, "tail_refitted": None, "replayed": False}
    with one_blas_thread():
        if blob is not None:
            state = LoopState(config, None)
            state.append(ledger, seq)
            try:
                tree, _ = snapshot.read_header(blob)
                policy_state = snapshot.restore(state.estimate, blob)
            except snapshot.SnapshotError as exc:
                raise refuse(path, "checkpoint row", str(exc)) from None
            summary["checkpoint_current"] = tree["fingerprint"] == snapshot.fingerprint()
            if summary["checkpoint_current"]:  # the tells after it refitted, as every open refits them
                state.fit(ledger, ledger.n_tells)
                summary["tail_refitted"] = ledger.n_tells - seq
            if (seq == ledger.n_tells or summary["checkpoint_current"]) \
                    and not np.array_equal(state.estimate.theta, opened.theta):
                if seq == ledger.n_tells:
                    raise refuse(path, "checkpoint row", "its estimate differs from the estimate row's")
                gap = float(np.abs(state.estimate.theta - opened.theta).max())
                raise refuse(path, "estimate row", f"not the estimate the {ledger.n_tells - seq} tells after the "
                                                   f"checkpoint reach from it ({gap:.3g} away)")
        if replay and ledger.n_tells:
            state = LoopState(config, None)
            state.fit(ledger, seq)
            if blob is not None and summary["checkpoint_current"] and snapshot.capture(state.estimate,
                                                                                       policy_state) != blob:
                raise refuse(path, "checkpoint row", f"not the state the refitted history reaches at tell {seq}")
            state.fit(ledger, ledger.n_tells)
            if not np.array_equal(state.estimate.theta, opened.theta):
                gap = float(np.abs(state.estimate.theta - opened.theta).max())
                raise refuse(path, "estimate row", f"not the estimate the refitted history reaches ({gap:.3g} away"
                                                   + ("" if summary["checkpoint_current"] in (None, True) else
                                                      "; the store was written by other code") + ")")
            summary["replayed"] = True
    return summary


def summary_text(summary: dict) -> str:
    c, counts = summary["config"], summary["counts"]
    lines = [f"{summary['path']}: a {summary['format']} ranker store"
             + (f" (store id {summary['store_id']})" if summary["store_id"] else ""),
             f"  {c.n_items} items, d = {c.dim}, policy {c.policy}, T = {c.T}, T0 = {c.T0}, M = {c.M}",
             f"  asked {counts['asked']}: told {counts['told']}, open {counts['open']}, expired {counts['expired']}"]
    if summary["format"] != FORMAT:
        lines.append(f"  (format {summary['format'].rsplit('/', 1)[-1]}: the first writable open upgrades it in place)")
    if summary["checkpoint_bytes"]:
        code = "" if summary["checkpoint_current"] else " (written by other code: the next writable open refits the history)"
        lines.append(f"  checkpoint after tell {summary['checkpoint_seq']} ({summary['checkpoint_bytes']:,} bytes){code}")
    kept = "estimate and checkpoint" if summary["checkpoint_bytes"] else "estimate"
    checked = ("schema and meta rows; every ask and tell (types, ranges, edges of the graph, order, statuses) and "
               "every ask's generator state; SQLite's integrity check")
    told, seq = summary["counts"]["told"], summary["checkpoint_seq"]
    if summary["tail_refitted"] is not None:
        checked += (f"; the checkpoint decoded and restored onto the told rows, and the {summary['tail_refitted']} "
                    f"tells after it refitted: the stored estimate is the one they reach, bit for bit")
    elif summary["checkpoint_bytes"]:
        checked += "; the checkpoint decoded" + (" (its estimate is the stored one)" if seq == told else "")
    if summary["replayed"]:
        checked += f"; the whole history refitted: the stored {kept} " + ("are" if summary["checkpoint_bytes"] else "is") \
            + " its own, bit for bit"
    lines.append(f"  verified: {checked}")
    if not summary["replayed"] and told:
        before = seq if summary["tail_refitted"] is not None else told
        lines.append(f"  not verified without --replay: that the told outcomes before the checkpoint ({before} of "
                     f"{told}) give the stored checkpoint and estimate -- an outcome changed among them is found "
                     "only by --replay, which refits the whole history")
    return "\n".join(lines)
