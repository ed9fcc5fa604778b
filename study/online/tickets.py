"""Tickets and outcomes: what :meth:`study.online.Ranker.ask` hands out and what ``tell`` and
``tell_many`` take back, validated before any transaction."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import _validate as check


@dataclass(frozen=True)
class Ticket:
    """One handed-out pair: compare ``major`` with ``other`` under context ``x``.

    Attributes
    ----------
    id : int
        The ask index t (1-based), the ticket's number in the store.
    major, other : int
        The items to compare (0-based); ``tell`` records how many comparisons ``other`` won.
    x : tuple of float
        The context the pair was chosen for.
    explored : bool
        Whether the policy explored (a random edge) at this ask.
    told_before : int
        How many told outcomes the estimate behind the choice had.
    asked_at : float
        When (Unix seconds).
    major_name, other_name : str
        The items' names.
    store_id : str
        The identifier of the store that handed it out (random, written at the store's creation):
        another store refuses the ticket.
    """

    id: int
    major: int
    other: int
    x: tuple
    explored: bool
    told_before: int
    asked_at: float
    major_name: str
    other_name: str
    store_id: str | None = None

    @property
    def pair(self) -> tuple:
        return self.major, self.other


class TicketError(ValueError):
    """A ticket that cannot be told or expired: ``reason`` says why (``"never_asked"``, ``"told"``,
    ``"expired"``, ``"other_store"``, ``"pair"``: not the pair it was asked for, or no pair of this
    ranker); ``ticket`` is its id; ``outcome`` the outcome's place in a batch (None for one tell);
    ``stored`` (reason ``"told"``) the outcome already stored for it: ``{"seq", "wins", "ties", "m"}``,
    so that a retried tell can be recognised as already recorded.  A ValueError, as every refused
    argument."""

    REASONS = ("never_asked", "told", "expired", "other_store", "pair")

    def __init__(self, message: str, *, reason: str, ticket, outcome=None, stored=None):
        assert reason in self.REASONS, reason
        super().__init__(message)
        self.reason, self.ticket, self.outcome, self.stored = reason, ticket, outcome, stored

    def in_batch(self, k: int) -> "TicketError":
        """The same refusal, as outcome ``k`` of a batch."""
        return TicketError(f"outcome {k}: {self}", reason=self.reason, ticket=self.ticket, outcome=k, stored=self.stored)


def outcome_fields(outcome, judged: bool = False) -> tuple:
    """(ticket, wins, m, ties) of one outcome of ``tell_many``: a ``(ticket, wins[, m[, ties]])``
    tuple or a mapping with those keys (m None: the ranker's M); ``judged``: (ticket, wins, m, ties,
    judge, side, bothbad), a mapping may also have the last three keys (:meth:`Ranker.tell`)."""
    more = ("judge", "side", "bothbad") if judged else ()
    if isinstance(outcome, dict):
        if set(outcome) - {"ticket", "wins", "m", "ties", *more} or not {"ticket", "wins"} <= set(outcome):
            optional = ", ".join(("m", "ties") + more)
            raise ValueError(f"a mapping needs the keys ticket and wins (and may have {optional}), got {sorted(outcome)}")
        common = outcome["ticket"], outcome["wins"], outcome.get("m"), outcome.get("ties", 0)
        return common + ((outcome.get("judge"), outcome.get("side"), outcome.get("bothbad", 0)) if judged else ())
    if isinstance(outcome, (tuple, list)) and 2 <= len(outcome) <= 4:
        ticket, wins, *rest = outcome
        common = ticket, wins, rest[0] if rest else None, rest[1] if len(rest) > 1 else 0
        return common + ((None, None, 0) if judged else ())
    raise ValueError(f"an outcome is (ticket, wins[, m[, ties]]) or a mapping, got {outcome!r}")


def check_batch(conn, batch: list, many: bool) -> None:
    """Every outcome of ``batch`` ((ask id, pair or None, ...) each) tellable, inside the write
    transaction, before any change: asked, of its pair, open, not twice in the batch."""
    import time

    from .store import Store

    seen = {}
    for k, (ask_id, pair, *_) in enumerate(batch):
        prefix = f"outcome {k}: " if many else ""
        where = dict(ticket=ask_id, outcome=k if many else None)
        row = Store.ask(conn, ask_id)
        if row is None:
            raise TicketError(f"{prefix}ticket {ask_id} was never asked (this ranker has handed out "
                              f"{Store.last_ask(conn)} tickets)", reason="never_asked", **where)
        _, _, major, other, _, _, status, _, closed_at = row
        if pair is not None and pair != (major, other):
            raise TicketError(f"{prefix}ticket {ask_id} is for the pair ({major}, {other}), not {pair}",
                              reason="pair", **where)
        if status != "open":
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(closed_at))
            stored = Store.tell_of(conn, ask_id) if status == "told" else None
            raise TicketError(f"{prefix}ticket {ask_id} was already {status} ({when}"
                              + ("" if stored is None else f", seq {stored['seq']}: wins {stored['wins']}, "
                                                           f"ties {stored['ties']} of m = {stored['m']}")
                              + "); it cannot be told again", reason=status, stored=stored, **where)
        if ask_id in seen:
            raise ValueError(f"{prefix}ticket {ask_id} is told twice in this batch (outcome {seen[ask_id]})")
        seen[ask_id] = k


def count(name: str, value, *, low: int) -> int:
    """A non-negative count: an integer, or a float with an integer value."""
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        value = int(value)
    try:
        return check.integer(name, value, low=low, high=check.MAX_INTEGER)
    except ValueError:
        hint = ""
        if name == "wins" and isinstance(value, (float, np.floating)) and np.isfinite(value):
            hint = ("; wins counts outright wins and a tie is told as ties=1, not as half a win (the convention of "
                    "every API: study.core.outcomes)")
        too_large = isinstance(value, int) and value > check.MAX_INTEGER
        raise ValueError(f"{name} must be an integer >= {low}" + (" and at most 2**63 - 1" if too_large else "")
                         + f", got {check._shown(value)}{hint}") from None



def ticket_key(ticket, store_id, path, n_items: int, edges):
    """(ask id, (major, other) or None) of a Ticket or an id, for the store ``store_id`` at ``path``;
    refused (:class:`TicketError`): a ticket of another store, or whose pair is not a pair of the
    store's ``n_items`` items and comparison graph ``edges`` (None: every pair) -- 'unknown pair'."""
    if not isinstance(ticket, Ticket):
        return count("ticket", ticket, low=1), None
    if ticket.store_id is None and store_id is not None:
        raise TicketError(f"ticket {ticket.id} carries no store id (a Ticket rebuilt without its store_id?); "
                          f"give its id instead (tell({ticket.id}, ...)) or keep its store_id",
                          reason="other_store", ticket=ticket.id)
    if ticket.store_id != store_id:
        raise TicketError(f"ticket {ticket.id} was handed out by another store (store id {ticket.store_id}), "
                          f"not by {path} (store id {store_id}); tell it to the ranker that asked it",
                          reason="other_store", ticket=ticket.id)
    major, other = ticket.major, ticket.other
    if not (0 <= major < n_items and 0 <= other < n_items) or major == other or (
            edges is not None and (min(major, other), max(major, other)) not in set(edges)):
        raise TicketError(f"unknown pair ({major}, {other}) on ticket {ticket.id}: not a pair of this "
                          f"ranker's {n_items} items and their comparison graph", reason="pair", ticket=ticket.id)
    return count("ticket id", ticket.id, low=1), (major, other)
