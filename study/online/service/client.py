"""A ranker served over HTTP (``python -m study.online serve``), with the Ranker's methods, so that
an ask/tell loop written for :class:`~study.online.Ranker` runs unchanged against a server.

Only the standard library (``http.client``, one kept-alive connection per client; use one client
per thread) and numpy: importing it imports no scipy, pandas, matplotlib or Ray (pandas, for the
tables of :meth:`Client.ranking`, :meth:`Client.intervals` and :meth:`Client.told`, when first
called).  Refusals raise what the Ranker raises: :class:`~study.online.tickets.TicketError`
(a ValueError) for a ticket never asked, told, expired, of another store or for another pair;
ValueError naming the field for bad input; PermissionError for a missing or wrong token;
:class:`~study.online.StoreFileError` when the server's file system refused.

Retrying safely.  A request that fails in transit (connection refused or cut, a timeout: the
server restarting after a crash) is sent again on a new connection, for up to ``retry_for``
seconds.  A tell (or batch) whose first try was recorded before the connection was lost is then
refused by the server as already told, with the stored outcome: when it equals the one sent
(``same_outcome``), the client takes the tell as done, so it is never counted twice and never
lost.  A retried ask whose first try was recorded leaves that ticket open (expire it, e.g.
``expire(older_than=3600)``).
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import numpy as np

from ..store import StoreError, StoreFileError
from ..tickets import Ticket, TicketError, outcome_fields

API_VERSION = "v1"
PREFIX = f"/api/{API_VERSION}"  # every route of the API is under it
TOKEN_ENV = "STUDY_ONLINE_TOKEN"
RANKING_COLUMNS = ("rank", "item", "name", "score", "se", "lower", "upper", "estimate", "level", "anytime",
                   "se_method", "retired")
INTERVAL_COLUMNS = ("item", "name", "dim", "estimate", "se", "lower", "upper", "level", "anytime", "se_method")
_TRANSIT = (ConnectionError, http.client.HTTPException, TimeoutError, OSError)


class Client:
    """A ranker served at ``url``, with the :class:`~study.online.Ranker`'s methods.

    Parameters
    ----------
    url : str
        The server, e.g. ``"http://127.0.0.1:8000"`` (``http`` or ``https``).
    token : str, optional
        The server's token (default: the environment variable ``STUDY_ONLINE_TOKEN``); ask, tell,
        tell_many and expire need it, reads too when the server is not on loopback.
    timeout : float
        Seconds to wait for one response.
    retry_for : float
        Seconds to keep retrying a request that failed in transit (module docstring); 0: never.

    Examples
    --------
    >>> from study.online import Client
    >>> ranker = Client("http://127.0.0.1:8000", token=open("leaderboard.sqlite.token").read())  # doctest: +SKIP
    >>> ticket = ranker.ask([1.0, 0.2])                                                           # doctest: +SKIP
    >>> ranker.tell(ticket, wins=1)                                                               # doctest: +SKIP
    """

    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | None = None, *, timeout: float = 60.0,
                 retry_for: float = 60.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://HOST[:PORT] or https://..., got {url!r}")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._base = parts.path.rstrip("/") + PREFIX
        token = os.environ.get(TOKEN_ENV) if token is None else token
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token.strip()}"
        self.timeout, self.retry_for = float(timeout), float(retry_for)
        self._conn = None
        self._config = None
        self.recorded_on_retry = 0  # writes whose lost first try the server had recorded (module docstring)

    # --- HTTP -----------------------------------------------------------------------------------
    def _connection(self):
        if self._conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = kind(self._host, self._port, timeout=self.timeout)
        return self._conn

    def _request(self, method: str, path: str, body=None, query=None) -> tuple:
        """(status, decoded body, retried): the request, sent again on a new connection while it
        fails in transit (for ``retry_for`` seconds)."""
        target = self._base + path + (f"?{urlencode(query, doseq=True)}" if query else "")
        payload = None if body is None else json.dumps(body).encode()
        deadline, pause, retried = time.monotonic() + self.retry_for, 0.05, False
        while True:
            try:
                conn = self._connection()
                conn.request(method, target, body=payload, headers=self._headers)
                response = conn.getresponse()
                data = response.read()
                kind = response.getheader("Content-Type", "")
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                break
            except _TRANSIT as exc:
                self.close()
                if time.monotonic() + pause > deadline:
                    raise ConnectionError(f"{self.url}: {type(exc).__name__}: {exc} (no answer for "
                                          f"{self.retry_for:g} s)") from None
                time.sleep(pause)
                pause, retried = min(2 * pause, 1.0), True
        decoded = json.loads(data) if kind.startswith("application/json") else data
        return response.status, decoded, retried

    def _call(self, method: str, path: str, body=None, query=None, *, recorded=None):
        """The decoded answer of a 2xx; the Ranker's exception otherwise.  ``recorded(answer)``:
        for a retried write, whether a 409 says the first try was recorded (then None is returned)."""
        status, answer, retried = self._request(method, path, body, query)
        if status < 300:
            return answer
        if retried and recorded is not None and recorded(answer):
            self.recorded_on_retry += 1
            return None
        raise _exception(status, answer)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # --- ask and tell ---------------------------------------------------------------------------
    def ask(self, x) -> Ticket:
        """The pair to compare for context ``x``: a :class:`~study.online.Ticket` (as Ranker.ask)."""
        return _ticket(self._call("POST", "/ask", {"x": _floats(x)}))

    def tell(self, ticket, wins, m=None, ties=0) -> None:
        """Record the outcome of ``ticket`` (as Ranker.tell; safe to retry: module docstring)."""
        self._call("POST", "/tell", _outcome(ticket, wins, m, ties), recorded=_same)

    def tell_many(self, outcomes) -> int:
        """Record a batch of outcomes in one transaction (as Ranker.tell_many); returns how many."""
        batch = []
        for k, outcome in enumerate(outcomes):
            try:
                batch.append(_outcome(*outcome_fields(outcome)))
            except ValueError as exc:
                raise ValueError(f"outcome {k}: {exc}") from None
        if not batch:
            return 0
        answer = self._call("POST", "/tell_many", {"outcomes": batch}, recorded=_same)
        return len(batch) if answer is None else answer["told"]

    def expire(self, ticket=None, *, older_than: float | None = None) -> int:
        """Close open tickets without an outcome (as Ranker.expire); returns how many."""
        body = {"older_than": older_than} if ticket is None else _ticket_fields(ticket)
        if ticket is not None and older_than is not None:
            raise ValueError("give either a ticket or older_than (seconds)")
        return self._call("POST", "/expire", body)["expired"]

    def pending(self) -> list:
        """The open tickets, oldest first."""
        return [_ticket(t) for t in self._call("GET", "/pending")]

    # --- reading --------------------------------------------------------------------------------
    @property
    def config(self) -> dict:
        """The ranker's arguments (n_items, dim, items, policy, T, T0, M, ...) and store id."""
        if self._config is None:
            self._config = self._call("GET", "/config")
        return self._config

    @property
    def store_id(self):
        return self.config["store_id"]

    def counts(self) -> dict:
        """asked, open, told, expired tickets; comparisons and ties told."""
        return self._call("GET", "/state")["counts"]

    @property
    def n_told(self) -> int:
        return self._call("GET", "/state")["n_told"]

    @property
    def n_asked(self) -> int:
        return self._call("GET", "/state")["n_asked"]

    @property
    def theta(self) -> np.ndarray:
        """The current estimate theta (n, d)."""
        return np.array(self._call("GET", "/estimate")["theta"], dtype=float)

    def ranking(self, x=None, level: float = 0.95, se: str = "model", anytime: bool = False, tightest_at=None):
        """The ranking at ``x`` (default the mean told context): the DataFrame of Ranker.ranking."""
        answer = self._call("GET", "/ranking", query=_query(x=x, level=level, se=se, anytime=anytime,
                                                            tightest_at=tightest_at))
        frame = _frame(answer["rows"], RANKING_COLUMNS)
        frame.attrs.update(se_method=answer["se_method"], score=answer["score"])
        return frame

    def intervals(self, level: float = 0.95, se: str = "model", anytime: bool = False, tightest_at=None):
        """CIs (or confidence sequences) of every theta_ik: the DataFrame of Ranker.intervals."""
        answer = self._call("GET", "/intervals", query=_query(level=level, se=se, anytime=anytime,
                                                              tightest_at=tightest_at))
        frame = _frame(answer["rows"], INTERVAL_COLUMNS)
        frame.attrs["se_method"] = se
        return frame

    def decision(self, level: float = 0.95, top: int = 1, x=None, se: str = "model", anytime: bool = True,
                 tightest_at=None) -> "Decision":
        """The stopping rule's verdict (as Ranker.decision: a :class:`~study.online.stopping.Decision`)."""
        from ..stopping import Decision  # its module imports the core's interval factors (scipy): when used

        a = self._call("GET", "/decision", query=_query(level=level, top=top, x=x, se=se, anytime=anytime,
                                                        tightest_at=tightest_at))
        return Decision(decided=a["decided"], top=tuple(a["top"]), margin=_nan(a["margin"]), closest=tuple(a["closest"]),
                        pair_level=a["pair_level"], anytime=a["anytime"], top_names=tuple(a["top_names"]),
                        closest_names=tuple(a["closest_names"]), level=a["level"], judgments=a["judgments"])

    def decided(self, level: float = 0.95, top: int = 1, x=None, se: str = "model", tightest_at=None) -> bool:
        """Is the top-``top`` set separated from the rest by the confidence sequences? (as Ranker.decided)"""
        return self.decision(level, top, x, se, True, tightest_at).decided

    def told(self, after: int = 0) -> "pd.DataFrame":
        """Every told row with seq > ``after``, in order (fetched page by page): seq, ticket, major,
        other, major_name, other_name, x, wins, ties, m, told_at."""
        rows = []
        while after is not None:
            page = self._call("GET", "/told", query={"after": after, "limit": 10_000})
            rows += page["rows"]
            after = page["next_after"]
        import pandas as pd

        return pd.DataFrame(rows, columns=["seq", "ticket", "major", "other", "major_name", "other_name", "x", "wins",
                                           "ties", "m", "told_at"])

    def diagram(self, contexts, path=None, *, uncertainty: bool = True, level: float = 0.95,
                threshold: float = 0.95, se: str = "model"):
        """The ranking diagram over ``contexts`` (as Ranker.diagram): the reduced adjacency; drawn to
        ``path`` when given (SVG for a name ending in .svg, else PNG)."""
        image = None if path is None else ("svg" if str(path).lower().endswith(".svg") else "png")
        answer = self._call("POST", "/diagram", {"contexts": [_floats(c) for c in contexts],
                                                 "uncertainty": uncertainty, "level": level, "threshold": threshold,
                                                 "se": se, "image": image})
        if path is not None:
            data = answer["image"].encode() if image == "svg" else base64.b64decode(answer["image"])
            Path(path).write_bytes(data)
        return np.array(answer["adjacency"], dtype=bool)


# --- conversions ----------------------------------------------------------------------------------
def _floats(x) -> list:
    return np.asarray(x, dtype=float).tolist()


def _nan(value):
    return float("nan") if value is None else value


def _query(**values) -> dict:
    return {k: (_floats(v) if k == "x" else str(v).lower() if isinstance(v, bool) else v)
            for k, v in values.items() if v is not None}


def _ticket(answer: dict) -> Ticket:
    return Ticket(**{**answer, "x": tuple(answer["x"])})


def _ticket_fields(ticket) -> dict:
    if isinstance(ticket, Ticket):
        return {"ticket": ticket.id, "store_id": ticket.store_id, "major": ticket.major, "other": ticket.other}
    return {"ticket": ticket}


def _count(value):
    """Counts as JSON integers (numpy integers, or floats with an integer value, as the Ranker takes them)."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return value


def _outcome(ticket, wins, m=None, ties=0) -> dict:
    fields = _ticket_fields(ticket)
    fields.update(wins=_count(wins), ties=_count(ties))
    if m is not None:
        fields["m"] = _count(m)
    return fields


def _same(answer) -> bool:
    return isinstance(answer, dict) and answer.get("reason") == "told" and answer.get("same_outcome") is True


def _frame(rows: list, columns):
    from ..report import Table  # pandas (and the report's scipy), when a table is first asked for

    frame = Table(rows, columns=list(columns))
    for column in ("score", "se", "lower", "upper", "estimate"):
        if column in frame:
            frame[column] = frame[column].astype(float)
    return frame


def _exception(status: int, answer) -> Exception:
    if not isinstance(answer, dict):
        return RuntimeError(f"the server answered {status}: {answer[:200]!r}")
    detail = answer.get("detail")
    if status == 422 and isinstance(detail, list):
        return ValueError("; ".join(f"{'.'.join(str(p) for p in e.get('loc', [])[1:]) or 'body'}: {e.get('msg')}"
                                    for e in detail))
    reason = answer.get("reason")
    if status in (404, 409) and reason in TicketError.REASONS:
        return TicketError(str(detail), reason=reason, ticket=answer.get("ticket"), outcome=answer.get("outcome"),
                           stored=answer.get("stored"))
    if status in (401, 403):
        return PermissionError(f"{status}: {detail}")
    if status == 503:
        return StoreFileError(str(detail))
    if status == 500 and reason == "store":
        return StoreError(str(detail))
    if status in (409, 413):
        return ValueError(str(detail))
    return RuntimeError(f"the server answered {status}: {detail}")
