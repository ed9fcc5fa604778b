"""The ranker as a service: one process owns a store and serves a JSON API over it (FastAPI on
uvicorn) and a live page at ``/``; judges anywhere ask and tell over HTTP
(:class:`study.online.Client` has the Ranker's methods).

Routes (prefix ``/api/v1``; the OpenAPI schema at ``/api/v1/openapi.json``):

=====================  ========================================================================
POST ask               context -> ticket                                           (token)
POST tell              one outcome -> its seq                                      (token)
POST tell_many         outcomes, one transaction -> how many                       (token)
POST expire            a ticket, or every ticket older than a number of seconds    (token)
GET  pending           the open tickets
GET  state             counts, told and asked (what the page polls)
GET  config            the ranker's arguments
GET  estimate          theta
GET  ranking           at the mean told context or ``x``: score, SE, CI or CS, per-item counts; as a
                       leaderboard (Elo-style scale, rank intervals, Rank (UB): study.online.standings)
GET  intervals         every theta_ik's CI or CS
GET  decision          the stopping rule's verdict, in words too
GET  told              the told rows after seq ``after`` (paged), for export and live views
GET  timeline          (time, seq) of the tells, sampled
GET  diagram.svg       the ranking diagram over the told contexts
POST diagram           the diagram over given contexts (adjacency, SVG or PNG)
GET  health            liveness (never needs the token)
GET  (the prefix)      an index of these routes (never needs the token)
=====================  ========================================================================

Authentication: ask, tell, tell_many and expire need ``Authorization: Bearer TOKEN``; reads need it
when the server listens on an address other than loopback, unless it was started with
``--open-reads`` (``reads_need_token``).  No token: 401; a wrong one: 403.

Refusals change nothing: a malformed body or a bad field is a 422 naming the field (``loc``); a
ticket never asked 404; a ticket told, expired, of another store or for another pair 409 (with
``reason``, and for a told ticket the stored outcome and ``same_outcome``: a retried tell whose
first try was recorded is recognisable, and never counted twice); a body over ``max_body`` bytes
413; a file-system refusal 503.

The ranker lives in a thread of its own (:class:`~study.online.service.worker.Service`): every use of it
is queued there, one at a time (a Ranker is used from one thread, and the store takes one writer
at a time anyway), while the event loop goes on reading, validating and answering requests, so
that the HTTP work overlaps the store's work and its fsync.  Drawing a diagram runs in a worker
thread, on copies.
"""
from __future__ import annotations

import base64
from contextlib import asynccontextmanager
import secrets
from pathlib import Path
from typing import Literal, Optional

import numpy as np
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from ..._version import __version__
from ...core import _validate as check
from ...core.confseq import check_tightest_at
from .. import report
from ..config import bounded_array
from ..standings import MIN_JUDGMENTS, standings
from ..store import StoreError, StoreFileError
from ..tickets import Ticket, TicketError
from . import api, arena_routes
from .hardening import HEADER_TIMEOUT, LOOPBACK_NAMES, MAX_BODY, HostGate, SlowBody, is_loopback
from .worker import MAX_PAGE, Service, draw

STATIC = Path(__file__).with_name("static")
P = api.PREFIX
REFUSALS = {code: {"model": api.Refusal} for code in (401, 403, 404, 409, 413, 503)}
SE = Literal["model", "sandwich", "cluster", "auto"]


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is refused with 413 before the route
    sees it (by its Content-Length, or while it streams in without one)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    def detail(self) -> str:
        return f"the request body is over the limit of {self.limit:,} bytes; send fewer outcomes per tell_many"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await JSONResponse({"detail": self.detail()}, status_code=413)(scope, receive, send)
        received = 0

        async def limited():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:  # raised where the route reads its body: a 413 response
                    raise HTTPException(413, self.detail())
            return message

        await self.app(scope, limited, send)


class TokenGate:
    """ASGI middleware: the token, checked in one place before anything else.  Ask, tell, tell_many
    and expire need ``Authorization: Bearer TOKEN`` (401 without it, 403 with another); the other
    routes of the API too with ``reads_need_token``, except health and the schema; the page and its
    assets never (their data come from the API)."""

    WRITES = frozenset(f"{P}/{name}" for name in ("ask", "tell", "tell_many", "expire"))
    OPEN = frozenset((f"{P}/health", f"{P}/openapi.json", P, f"{P}/"))
    JUDGED = frozenset(f"{P}/{name}" for name in ("battle/next", "battle/vote", "judges/report"))  # the judging page's

    def __init__(self, app, token: str, reads_need_token: bool, judge_of=None, judged: bool = False):
        self.app, self.expected, self.reads_need_token = app, f"bearer {token}".encode(), reads_need_token
        self.judge_of = judge_of  # async token -> a judge's name or None (study.online.service.arena_routes)
        self.judged = judged  # the judging page is served: its routes need a token, a judge's (the router says whose)

    @classmethod
    def guarded(cls, path: str, reads_need_token: bool, judged: bool = False) -> bool:
        return path in cls.WRITES or (judged and path in cls.JUDGED) or path in arena_routes.ADMIN or (
            reads_need_token and path.startswith(f"{P}/") and path not in cls.OPEN)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.guarded(scope["path"], self.reads_need_token, self.judged):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given[:7].lower() != b"bearer ":
                return await JSONResponse(
                    {"detail": "this needs the server's token: send 'Authorization: Bearer TOKEN' (the token is in "
                               "the file beside the store, or the server's STUDY_ONLINE_TOKEN)"},
                    status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            if not secrets.compare_digest(b"bearer " + given[7:].strip(), self.expected):
                judge = None if self.judge_of is None or scope["path"] in arena_routes.ADMIN else \
                    await self.judge_of(given[7:].strip().decode("latin-1"))
                if judge is None:
                    return await JSONResponse({"detail": "wrong token"}, status_code=403)(scope, receive, send)
                scope.setdefault("state", {})["judge"] = judge  # a named judge's token: its tells carry the name
        await self.app(scope, receive, send)


def invalid(loc: tuple, message: str, value=None) -> RequestValidationError:
    """A 422 naming the field at ``loc``, in FastAPI's own form."""
    return RequestValidationError([{"type": "value_error", "loc": list(loc), "msg": message, "input": value}])


def refused(status: int, detail: str, **fields) -> JSONResponse:
    return JSONResponse({"detail": detail, **{k: v for k, v in fields.items() if v is not None}}, status_code=status)


def finite_or_none(value):
    value = float(value)
    return value if np.isfinite(value) else None


def json_safe(value):
    """``value`` with the floats JSON cannot hold (NaN, inf: echoed from a refused input) as text."""
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    return value


def records(frame) -> list:
    """A DataFrame's rows as JSON values (NaN as null)."""
    out = []
    for row in frame.to_dict("records"):
        out.append({k: (finite_or_none(v) if isinstance(v, (float, np.floating)) else
                        v.item() if isinstance(v, np.generic) else v) for k, v in row.items()})
    return out


def ticket_json(ticket: Ticket) -> dict:
    return {"id": ticket.id, "major": ticket.major, "other": ticket.other, "x": list(ticket.x),
            "explored": ticket.explored, "told_before": ticket.told_before, "asked_at": ticket.asked_at,
            "major_name": ticket.major_name, "other_name": ticket.other_name, "store_id": ticket.store_id}


def create_app(open_ranker, *, token: str, reads_need_token: bool = False, max_body: int = MAX_BODY,
               allowed_hosts=LOOPBACK_NAMES, body_timeout: float = HEADER_TIMEOUT,
               min_judgments: int = MIN_JUDGMENTS, pool=None, judging_log=None,
               overlap: float = 0.1) -> FastAPI:
    """The app serving the writable :class:`~study.online.Ranker` that ``open_ranker()`` opens (or
    creates), in a thread of its own, when the app starts (closed when it stops); or a
    :class:`~study.online.service.worker.Service` already opened (``serve`` opens it first, to refuse a
    bad store before serving).  ``token``: what ask, tell, tell_many and expire need (and reads,
    with ``reads_need_token``).  ``allowed_hosts``: the ``Host`` names it answers to (``"*"``: any;
    :mod:`study.online.service.hardening`); ``body_timeout``: seconds a body may stop coming (then 408);
    ``min_judgments``: the default of ``GET ranking``'s (:mod:`study.online.standings`).  ``pool``
    (:func:`study.online.service.pool.read_pool`): the judging page at ``/judge``
    (:mod:`study.online.service.judge_routes`), judges identified by their tokens of the store, the battle
    log appended to ``judging_log``, a share ``overlap`` re-served for agreement."""
    if not token:
        raise ValueError("a server needs a token")
    service = open_ranker if isinstance(open_ranker, Service) else Service(open_ranker)

    @asynccontextmanager
    async def lifespan(app):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(title="study.online ranker", version=__version__, openapi_url=f"{P}/openapi.json", docs_url=None,
                  redoc_url=None, description=__doc__.split("\n\n")[0], lifespan=lifespan)
    app.add_middleware(SlowBody, seconds=body_timeout)
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(TokenGate, token=token, reads_need_token=reads_need_token,
                       judge_of=lambda given: arena_routes.judge_of(service, given), judged=pool is not None)
    app.add_middleware(HostGate, allowed=allowed_hosts)  # the last added runs first: a foreign Host learns nothing
    app.include_router(arena_routes.router(service))
    if pool is not None:
        from .judge_routes import judge_router

        app.include_router(judge_router(pool, identify=lambda given: arena_routes.judge_of(service, given),
                                        log=judging_log, service=service, store_judges=True, overlap=overlap,
                                        admin_token=token))
    app.state.service = service
    call = service.call  # every use of the ranker, in its thread
    default_min_judgments = min_judgments

    def openapi() -> dict:  # the gate's rule in the schema: which routes need the bearer token
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = {"HTTPBearer": {
                "type": "http", "scheme": "bearer", "description": "the server's token (the file beside the store, "
                                                                  "0600, or STUDY_ONLINE_TOKEN)"}}
            for path, operations in schema["paths"].items():
                if TokenGate.guarded(path, reads_need_token, pool is not None):
                    for operation in operations.values():
                        operation["security"] = [{"HTTPBearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi

    @app.exception_handler(RequestValidationError)
    async def request_refused(request, exc):  # FastAPI's own form, with the values JSON can hold
        return JSONResponse({"detail": json_safe(jsonable_encoder(exc.errors()))}, status_code=422)

    @app.exception_handler(StoreFileError)
    async def file_refused(request, exc):
        return refused(503, str(exc))

    @app.exception_handler(StoreError)
    async def store_refused(request, exc):
        return refused(500, str(exc), reason="store")

    @app.exception_handler(TicketError)
    async def ticket_error(request, exc):  # refused before the ranker saw it (another store)
        return ticket_refused(exc)

    # --- helpers over the request's values (in the loop: the config and store id never change) --
    def context(x, loc):
        if x is None:
            return None
        d = service.config.dim
        if len(x) != d:
            raise invalid(loc, f"x has {len(x)} entries; this ranker's contexts have d = {d}", x)
        try:
            return bounded_array("x", x, check.MAX_ABS_CONTEXT, ndim=1, shape=(d,))
        except ValueError as exc:
            raise invalid(loc, str(exc), x) from None

    def outcome(body: api.Outcome, loc: tuple) -> tuple:
        """(ticket, wins, m, ties) for Ranker.tell; 422 naming the field, 409 for another store."""
        M = service.config.M
        m = M if body.m is None else body.m
        if m > M:
            raise invalid(loc + ("m",), f"m = {m} exceeds M = {M}, the comparisons per ask of this ranker", m)
        if body.wins + body.ties > m:
            raise invalid(loc + ("wins",), f"wins + ties = {body.wins} + {body.ties} exceeds m = {m}", body.wins)
        if body.bothbad > body.ties:
            raise invalid(loc + ("bothbad",), f"bothbad = {body.bothbad} exceeds ties = {body.ties}", body.bothbad)
        return ticket_of(body, loc), body.wins, m, body.ties

    def ticket_of(body, loc):
        store_id = service.ranker.store_id
        if body.store_id is not None and body.store_id != store_id:
            raise TicketError(f"ticket {body.ticket} was handed out by another store (store id {body.store_id}), "
                              f"not by this server's (store id {store_id})", reason="other_store", ticket=body.ticket)
        if (body.major is None) != (body.other is None):
            field = "other" if body.other is None else "major"
            raise invalid(loc + (field,), "give both major and other (the ticket's pair), or neither")
        if body.major is None:
            return body.ticket
        return Ticket(id=body.ticket, major=body.major, other=body.other, x=(), explored=False, told_before=0,
                      asked_at=0.0, major_name="", other_name="", store_id=store_id)

    def ticket_refused(exc: TicketError, same=None) -> JSONResponse:
        return refused(404 if exc.reason == "never_asked" else 409, str(exc), reason=exc.reason, ticket=exc.ticket,
                       outcome=exc.outcome, stored=exc.stored, same_outcome=same)

    def told_as_asked(exc: TicketError, batch: list):
        """For a told ticket: is every outcome of ``batch`` stored as sent (the retry of a recorded
        tell or batch)?  In the ranker's thread."""
        if exc.reason != "told":
            return None
        stored = service.stored([t.id if isinstance(t, Ticket) else t for t, *_ in batch])
        return all(s is not None and (s["wins"], s["ties"], s["m"]) == (w, c, m)
                   for s, (_, w, m, c) in zip(stored, batch))

    def tightest(value):
        if value is None:
            return None
        try:
            return check_tightest_at(value)
        except ValueError as exc:
            raise invalid(("query", "tightest_at"), str(exc), value) from None

    # --- writes ---------------------------------------------------------------------------------
    @app.post(f"{P}/ask", response_model=api.TicketModel, responses=REFUSALS,
              summary="the pair to compare for a context")
    async def ask(body: api.AskRequest):
        x = context(body.x, ("body", "x"))

        def work():
            try:
                ticket = service.ranker.ask(x)
            except StoreError:
                raise
            except ValueError as exc:  # x is valid: the horizon is used up
                return refused(409, str(exc), reason="horizon")
            return JSONResponse(ticket_json(ticket))  # built here: the hot path skips re-validating its answer

        return await call(work)

    @app.post(f"{P}/tell", response_model=api.Told, responses=REFUSALS, summary="one outcome (one transaction)")
    async def tell(body: api.Outcome, request: Request):
        told = outcome(body, ("body",))

        def work():
            try:
                service.ranker.tell(*told, judge=request.scope.get("state", {}).get("judge"), side=body.side,
                                    bothbad=body.bothbad)
            except TicketError as exc:
                return ticket_refused(exc, told_as_asked(exc, [told]))
            return JSONResponse({"ticket": body.ticket, "seq": service.n_told, "n_told": service.n_told})

        return await call(work)

    @app.post(f"{P}/tell_many", response_model=api.ToldMany, responses=REFUSALS,
              summary="a batch of outcomes (one transaction: all or none)")
    async def tell_many(body: api.TellManyRequest, request: Request):
        batch, seen = [], {}
        for k, o in enumerate(body.outcomes):
            if o.ticket in seen:
                raise invalid(("body", "outcomes", k, "ticket"), f"ticket {o.ticket} is told twice in this batch "
                                                                 f"(outcome {seen[o.ticket]})", o.ticket)
            seen[o.ticket] = k
            batch.append(outcome(o, ("body", "outcomes", k)))

        def work():
            try:
                judge = request.scope.get("state", {}).get("judge")
                told = service.ranker.tell_many([dict(ticket=t, wins=w, m=m, ties=c, judge=judge, side=o.side,
                                                      bothbad=o.bothbad) for (t, w, m, c), o in zip(batch, body.outcomes)])
            except TicketError as exc:
                return ticket_refused(exc, told_as_asked(exc, batch))
            n = service.n_told
            return {"told": told, "first_seq": n - told + 1 if told else None, "n_told": n}

        return await call(work)

    @app.post(f"{P}/expire", response_model=api.Expired, responses=REFUSALS,
              summary="close open tickets without an outcome")
    async def expire(body: api.ExpireRequest):
        if (body.ticket is None) == (body.older_than is None):
            raise invalid(("body", "ticket" if body.ticket is None else "older_than"),
                          "give either a ticket or older_than (seconds)")
        ticket = None if body.ticket is None else ticket_of(body, ("body",))

        def work():
            try:
                if ticket is None:
                    return {"expired": service.ranker.expire(older_than=body.older_than)}
                return {"expired": service.ranker.expire(ticket)}
            except TicketError as exc:
                return ticket_refused(exc)

        return await call(work)

    # --- reads ----------------------------------------------------------------------------------
    @app.get(P, include_in_schema=False)
    @app.get(f"{P}/", summary="this index: the routes, the schema, the docs (no token)")
    async def index():
        routes = [{"method": method, "path": route.path, "summary": route.summary or ""}
                  for route in app.routes if getattr(route, "include_in_schema", False)
                  and route.path.startswith(f"{P}/") and route.path != f"{P}/"
                  for method in sorted(getattr(route, "methods", ()) or ())]
        return {"api": api.VERSION, "version": __version__, "schema": f"{P}/openapi.json", "page": "/",
                "docs": "docs/service.md of the study package", "routes": routes}

    @app.get(f"{P}/health", response_model=api.Health, summary="liveness (no token)")
    async def health():
        return {"status": "ok", "version": __version__, "api": api.VERSION}

    @app.get(f"{P}/state", response_model=api.State, responses=REFUSALS)
    async def state():
        return await call(service.state)

    @app.get(f"{P}/config", response_model=api.ConfigModel, responses=REFUSALS)
    async def get_config():
        c = service.config
        return {"store": service.ranker.path.name, "store_id": service.ranker.store_id, "n_items": c.n_items,
                "dim": c.dim, "items": c.labels, "policy": c.policy, "T": c.T, "T0": c.T0, "M": c.M,
                "alpha": c.alpha, "gamma": c.gamma, "c_lambda": c.c_lambda, "tie_break": c.tie_break,
                "edges": None if c.edges is None else [list(e) for e in c.edges], "reads_need_token": reads_need_token,
                "min_judgments": default_min_judgments, "open_horizon": c.open_horizon, "limit": c.limit,
                "retired": [c.labels[i] for _, i in c.retired], "judging": pool is not None}

    @app.get(f"{P}/pending", response_model=list[api.TicketModel], responses=REFUSALS)
    async def pending():
        return [ticket_json(t) for t in await call(service.ranker.pending)]

    @app.get(f"{P}/estimate", response_model=api.Estimate, responses=REFUSALS)
    async def estimate():
        return await call(lambda: {"n_told": service.ranker.n_told, "theta": service.ranker.theta.tolist()})

    @app.get(f"{P}/ranking", response_model=api.Ranking, responses=REFUSALS,
             summary="the items ranked at a context, with CIs (or anytime CSs) and per-item counts")
    async def ranking(level: float = Query(0.95, gt=0.0, lt=1.0), se: SE = "model", anytime: bool = False,
                      tightest_at: Optional[float] = None, x: Optional[list[float]] = Query(None),
                      scale: Literal["logit", "elo"] = "logit", anchor: Optional[str] = None,
                      anchor_rating: float = Query(1000.0, ge=-1e9, le=1e9), ranks: bool = True,
                      min_judgments: int = Query(default_min_judgments, ge=0, le=api.MAX_INT)):
        at, tight = context(x, ("query", "x")), tightest(tightest_at)
        if anchor is not None and anchor not in service.config.labels:
            raise invalid(("query", "anchor"), f"anchor {anchor!r} is not an item of this ranker", anchor)

        def work():
            ranker, x = service.ranker, at
            if x is None:
                if ranker.n_asked == 0:
                    return refused(409, "nothing asked yet: no context to rank at", reason="nothing_asked")
                x = ranker.mean_context()
            try:
                table = ranker.ranking(x, level=level, se=se, anytime=anytime, tightest_at=tight)
            except StoreError:
                raise
            except ValueError as exc:  # se=cluster where no named judge has told
                return refused(409, str(exc), reason="no_judges")
            method = table.attrs["se_method"]  # "auto" resolved
            result = ranker._snapshot(method)[1] if ranks and table.attrs["score"] == "debiased" else None
            return x, {"x": x.tolist(), "level": level, "anytime": anytime, "se_method": method,
                       "score": table.attrs["score"], "n_told": service.n_told, "rows": records(table),
                       "items": service.items()}, result

        answer = await call(work)
        if isinstance(answer, JSONResponse):
            return answer
        x, body, result = answer
        body.update(await run_in_threadpool(  # the rank intervals' draws: off the ranker's thread
            standings, body["rows"], result, x, body["items"], level=level, scale=scale, anchor=anchor,
            anchor_rating=anchor_rating, min_judgments=min_judgments))
        return body

    @app.get(f"{P}/intervals", response_model=api.Intervals, responses=REFUSALS)
    async def intervals(level: float = Query(0.95, gt=0.0, lt=1.0), se: SE = "model", anytime: bool = False,
                        tightest_at: Optional[float] = None):
        tight = tightest(tightest_at)

        def work():
            try:
                table = service.ranker.intervals(level=level, se=se, anytime=anytime, tightest_at=tight)
            except StoreError:
                raise
            except ValueError as exc:  # not identified yet
                return refused(409, str(exc), reason="no_intervals")
            return {"n_told": service.n_told, "rows": records(table)}

        return await call(work)

    @app.get(f"{P}/decision", response_model=api.DecisionModel, responses=REFUSALS,
             summary="the stopping rule's verdict (names, margin, in words)")
    async def decision(level: float = Query(0.95, gt=0.0, lt=1.0), top: int = Query(1, ge=1, le=api.MAX_INT),
                       se: SE = "model",
                       anytime: bool = True, tightest_at: Optional[float] = None,
                       x: Optional[list[float]] = Query(None)):
        at, tight = context(x, ("query", "x")), tightest(tightest_at)
        if top >= service.config.n_items:
            raise invalid(("query", "top"), f"top must lie in [1, {service.config.n_items - 1}]", top)

        def work():
            ranker, x = service.ranker, at
            if x is None:
                x = ranker.mean_context() if ranker.n_told else np.zeros(service.config.dim)
            verdict = ranker.decision(level=level, top=top, x=x, se=se, anytime=anytime, tightest_at=tight)
            return {"decided": verdict.decided, "top": list(verdict.top), "top_names": list(verdict.top_names),
                    "margin": finite_or_none(verdict.margin), "closest": list(verdict.closest),
                    "closest_names": list(verdict.closest_names), "pair_level": verdict.pair_level,
                    "level": verdict.level, "anytime": verdict.anytime, "judgments": verdict.judgments,
                    "words": verdict.words(), "x": x.tolist(), "n_told": service.n_told}

        return await call(work)

    @app.get(f"{P}/told", response_model=api.ToldPage, responses=REFUSALS,
             summary="the told rows with seq > after, in order (paged)")
    async def told(after: int = Query(0, ge=0, le=api.MAX_INT), limit: int = Query(1000, ge=1, le=MAX_PAGE)):
        return await call(service.told, after, limit)

    @app.get(f"{P}/timeline", response_model=api.Timeline, responses=REFUSALS)
    async def timeline(points: int = Query(200, ge=2, le=MAX_PAGE)):
        return await call(service.timeline, points)

    async def drawn(contexts, uncertainty: bool, level: float, threshold: float, se: str, image, fallback: bool):
        """(adjacency, image) drawn in a worker thread from a copy of the state; the point version
        while there are no CIs (or on a cycle among many items) when ``fallback``, else a 409."""
        theta, result, contexts, told = await call(service.diagram_inputs, contexts, uncertainty, se)
        title = f"{service.ranker.path.name}: {told} told outcomes"
        if result is not None and not result.available:
            if not fallback:
                return refused(409, "confidence intervals are not available yet: the told outcomes do not identify "
                                    "theta", reason="no_intervals")
            result, title = None, title + " (point version: no CIs yet)"
        try:
            return await run_in_threadpool(draw, theta, result, contexts, service.config.labels, level=level,
                                           threshold=threshold, image=image, title=title)
        except ValueError:  # a cycle among many items
            if not fallback:
                raise
            return await run_in_threadpool(draw, theta, None, contexts, service.config.labels, level=level,
                                           threshold=threshold, image=image, title=title + " (point version)")

    @app.get(f"{P}/diagram.svg", response_class=Response,
             responses={200: {"content": {"image/svg+xml": {}}}, **REFUSALS},
             summary="the ranking diagram over the told contexts, as SVG")
    async def diagram_svg(uncertainty: bool = True, level: float = Query(0.95, gt=0.0, lt=1.0),
                          threshold: float = Query(0.95, gt=0.0, le=1.0), se: SE = "model"):
        n = service.config.n_items
        if n > report.MAX_DIAGRAM_ITEMS:
            return refused(409, f"{n} items: at most {report.MAX_DIAGRAM_ITEMS} make a readable diagram",
                           reason="too_many_items")
        told = await call(lambda: service.ranker.n_told)
        if told == 0:
            return refused(409, "nothing told yet: no diagram", reason="nothing_told")
        key = (told, uncertainty, level, threshold, se)
        svg = service.cached(key)
        if svg is None:
            svg = (await drawn(None, uncertainty, level, threshold, se, "svg", fallback=True))[1]
            service.keep(key, svg)
        return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})

    @app.post(f"{P}/diagram", response_model=api.Diagram, responses=REFUSALS,
              summary="the ranking diagram over given contexts: adjacency, and an image")
    async def diagram(body: api.DiagramRequest):
        contexts = np.array([context(c, ("body", "contexts", k)) for k, c in enumerate(body.contexts)])
        if await call(lambda: service.ranker.n_told) == 0:
            return refused(409, "nothing told yet: no diagram", reason="nothing_told")
        answer = await drawn(contexts, body.uncertainty, body.level, body.threshold, body.se, body.image,
                             fallback=False)
        if isinstance(answer, JSONResponse):
            return answer
        adjacency, image = answer
        if image is not None:
            image = image.decode() if body.image == "svg" else base64.b64encode(image).decode()
        return {"adjacency": np.asarray(adjacency, dtype=int).tolist(), "image_format": body.image, "image": image}

    # --- the page -------------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
