"""The judging page's routes, as a FastAPI router to include in the server's app:

    app.include_router(judge_router(pool, identify=...))

* ``GET /judge`` -- the page (``static/judge.html``; its script and style are served by the app's
  ``/static`` mount);
* ``GET /api/v1/battle/next`` -- the judge's next battle: a prompt from the :class:`~.pool.Assigner`
  (one the judge has not been served; a stated share re-served to a second judge), the pair from
  the ranker's :meth:`~study.online.Ranker.ask` at the prompt's context (the store's policy), the
  sides drawn at random, the names hidden;
* ``POST /api/v1/battle/vote`` -- ``left``, ``right``, ``tie``, ``bothbad`` or ``skip`` for the
  judge's own open battle: told to the ranker (a tie of either kind is a tie for it; a skip expires
  the ticket) and appended to a battle log (JSON Lines that ``python -m study.leaderboard`` and
  ``python -m study.leaderboard judges`` read: model_a = the left model, model_b = the right one,
  winner, judge, left, seconds, tstamp, question_id, ticket); the answer reveals the names;
* ``GET /api/v1/judges/report`` -- :func:`study.leaderboard.judges.judge_report` of the log.

The JSON of each route is specified at the top of ``static/judge.js`` and in docs/service.md.

**Who the judge is** comes from ``identify(token)``: a name, or None to refuse (401 without a
bearer token, 403 with an unknown one); a coroutine's result is awaited.  It is a hook: the
server's named judge tokens plug in there (``python -m study.online serve STORE --prompts FILE
--responses FILE`` identifies judges by the store's judge tokens, :func:`study.online.judges.who`,
through the server's token gate, and tells carry the judge's name: ``store_judges=True``);
:func:`tokens` makes one from a mapping, for tests and small panels.

Every vote is told to the ranker with the side (``side="major"`` where the ticket's major item was
shown on the left) and, for "both bad", ``bothbad=1``, so that the store holds judges, sides and
times (:mod:`study.online.export`).  The JSON Lines battle log is kept beside it: it maps tickets to
the pool's question ids (the export's ``question_id`` where the log is given), holds the re-served
battles the ranker is not told, and, replayed at start, keeps a judge from being served a prompt
again after a restart.

**The gap.** ``Ranker.ask(x)`` chooses among all the store's items and cannot be told which have a
response to the prompt; where it picks a model without one, its ticket is expired (the policy's
draw is spent, nothing is told) and another prompt is tried, up to ``retries`` times, then the
request is refused (409 ``no_response``) saying so.  Pools where every model answers every prompt
never meet it.  A re-served battle (agreement) is not asked of the ranker: its vote goes to the log
only, not into the likelihood.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import json
import math
import secrets
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel

from .pool import Assigner, Pool
from .render import render_markdown

__all__ = ["judge_router", "tokens", "CHOICES"]

STATIC = Path(__file__).resolve().parent / "static"
API = "/api/v1"
CHOICES = ("left", "right", "tie", "bothbad", "skip")
WINNER = {"tie": "tie", "bothbad": "tie (bothbad)"}


def tokens(mapping: dict):
    """An ``identify`` hook from ``{token: judge name}`` (compared in constant time)."""
    items = [(str(t).encode(), str(name)) for t, name in mapping.items()]

    def identify(token: str):
        given = token.encode()
        found = None
        for expected, name in items:  # every entry compared: the time does not say which matched
            if secrets.compare_digest(given, expected):
                found = name
        return found
    return identify


class Vote(BaseModel):
    battle: str
    choice: str


@dataclass
class Battle:
    id: str
    judge: str
    question_id: str
    left: str
    right: str
    ticket: object  # the ranker's Ticket, or None for a re-served battle
    served_at: float
    expires_at: float


def _refused(status, detail, reason):
    return JSONResponse({"detail": detail, "reason": reason}, status_code=status)


def judge_router(pool: Pool, *, identify, log=None, overlap: float = 0.1, seed: int = 0, ttl: float = 900.0,
                 retries: int = 5, service=None, store_judges: bool = False,
                 admin_token: str | None = None) -> APIRouter:
    """The judging page's routes (module docstring).

    Parameters
    ----------
    pool : Pool
        The prompts and responses (:func:`~.pool.read_pool`); its models must be the store's items.
    identify : callable
        ``identify(token) -> judge name or None``.
    log : str or Path, optional
        The battle log (JSON Lines, appended to); where it exists, its battles are replayed into the
        assigner, so that no judge is served a prompt again after a restart.
    overlap, seed
        The :class:`~.pool.Assigner`'s share of re-served battles and seed (also of the sides).
    ttl : float
        Seconds a battle stays open; a vote after it is refused (410) and its ticket expired.
    retries : int
        Prompts tried when the ranker asks for a model without a response (module docstring).
    service : study.online.service.worker.Service, optional
        The ranker's service; default, the including app's ``app.state.service``.
    store_judges : bool
        The names ``identify`` gives are the store's judges (:mod:`study.online.judges`): tells
        carry them (``Ranker.tell(..., judge=)``).  False (the default, for :func:`tokens`): the
        judge is in the battle log only.
    admin_token : str, optional
        The server's token: it reads ``GET judges/report`` too (the leaderboard page's admin view).
    """
    if not callable(identify):
        raise TypeError("identify must be a callable: token -> judge name or None")
    ttl, retries = float(ttl), int(retries)
    if not (math.isfinite(ttl) and ttl > 0) or retries < 1:
        raise ValueError(f"ttl must be > 0 and retries >= 1, got {ttl!r} and {retries!r}")
    assigner = Assigner(pool, overlap=overlap, seed=seed)
    sides = np.random.default_rng([seed, 1])
    log = None if log is None else Path(log)
    votes = _replay(log, assigner) if log is not None and log.exists() else []
    battles: dict = {}
    lock = threading.Lock()
    next_lock = asyncio.Lock()
    router = APIRouter()

    @lru_cache(maxsize=4096)
    def html(question_id, model):
        return render_markdown(pool.prompts[question_id] if model is None else pool.response(question_id, model))

    async def judge_of(request: Request):
        named = request.scope.get("state", {}).get("judge")  # the server's gate read the judge's token already
        if named is not None:
            return named, None
        header = request.headers.get("authorization", "")
        if header[:7].lower() != "bearer " or not header[7:].strip():
            return None, _refused(401, "the judging page needs your judge token: open it as /judge#token=TOKEN",
                                  "no_token")
        judge = identify(header[7:].strip())
        if inspect.isawaitable(judge):
            judge = await judge
        if judge is None:
            return None, _refused(403, "unknown or revoked judge token", "unknown_judge")
        return judge, None

    def service_of(request):
        return service if service is not None else request.app.state.service

    async def sweep(svc):
        """Expire the battles past their time (their tickets too)."""
        now = time.time()
        with lock:
            old = [b for b in battles.values() if b.expires_at <= now]
            for b in old:
                del battles[b.id]
        for b in old:
            if b.ticket is not None:
                await svc.call(_expire, svc, b.ticket)

    @router.get("/judge", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "judge.html", headers={"Cache-Control": "no-cache"})

    @router.get(f"{API}/battle/next", summary="the judge's next battle (judge token)")
    async def next_battle(request: Request):
        judge, refusal = await judge_of(request)
        if refusal is not None:
            return refusal
        svc = service_of(request)
        await sweep(svc)
        async with next_lock:  # one at a time: the assigner's draw and its record stay together
            gaps = []
            for _ in range(retries):
                assignment = assigner.next(judge)
                if assignment is None:
                    return JSONResponse({"done": True, "detail": "you have judged every prompt of this pool"})
                q, ticket = assignment.question_id, None
                if assignment.pair is not None:
                    pair = assignment.pair
                else:
                    ticket = await svc.call(svc.ranker.ask, pool.context(q))
                    pair = (ticket.major_name, ticket.other_name)
                    missing = sorted(set(pair) - pool.available(q))
                    if missing:
                        await svc.call(_expire, svc, ticket)
                        gaps.append(f"{q}: no response of {missing}")
                        continue
                assigner.record(judge, q, pair)
                left, right = pair if sides.random() < 0.5 else pair[::-1]
                now = time.time()
                battle = Battle(secrets.token_urlsafe(12), judge, q, left, right, ticket, now, now + ttl)
                with lock:
                    battles[battle.id] = battle
                return JSONResponse({"done": False, "battle": battle.id, "question_id": q,
                                     "category": (pool.categories or {}).get(q), "prompt_html": html(q, None),
                                     "left_html": html(q, left), "right_html": html(q, right),
                                     "expires_at": battle.expires_at})
        return _refused(409, f"the ranker asked {retries} times for models without a response to the prompt "
                             f"({'; '.join(gaps[:3])}): Ranker.ask cannot yet be restricted to the models that "
                             "answered; give every model a response to every prompt", "no_response")

    @router.post(f"{API}/battle/vote", summary="the judge's verdict on their open battle (judge token)")
    async def vote(body: Vote, request: Request):
        judge, refusal = await judge_of(request)
        if refusal is not None:
            return refusal
        if body.choice not in CHOICES:
            return _refused(422, f"choice must be one of {list(CHOICES)}, got {body.choice!r}", "choice")
        svc = service_of(request)
        now = time.time()
        with lock:
            battle = battles.get(body.battle)
            if battle is None:
                return _refused(404, "no open battle with this id (voted, skipped, expired or never served)",
                                "unknown_battle")
            if battle.judge != judge:
                return _refused(403, "this battle was served to another judge", "other_judge")
            del battles[battle.id]
        if battle.expires_at <= now:
            if battle.ticket is not None:
                await svc.call(_expire, svc, battle.ticket)
            return _refused(410, "this battle expired before the vote; nothing was recorded", "expired")
        names = {"left_model": battle.left, "right_model": battle.right}
        if body.choice == "skip":
            if battle.ticket is not None:
                await svc.call(_expire, svc, battle.ticket)
            return JSONResponse({"recorded": False, **names})
        winner = {"left": "model_a", "right": "model_b"}.get(body.choice) or WINNER[body.choice]
        if battle.ticket is not None:
            t = battle.ticket
            winner_name = {"model_a": battle.left, "model_b": battle.right}.get(winner)
            try:
                await svc.call(functools.partial(
                    svc.ranker.tell, t, int(winner_name == t.other_name), 1, int(winner_name is None),
                    judge=judge if store_judges else None, side="major" if battle.left == t.major_name else "other",
                    bothbad=int(body.choice == "bothbad")))
            except ValueError as exc:  # the judge revoked meanwhile, say: nothing told
                await svc.call(_expire, svc, t)
                return _refused(409, " ".join(str(exc).split()), "refused")
        row = {"model_a": battle.left, "model_b": battle.right, "winner": winner, "judge": judge,
               "left": battle.left, "seconds": round(now - battle.served_at, 3), "tstamp": now,
               "question_id": battle.question_id, "ticket": None if battle.ticket is None else battle.ticket.id}
        with lock:
            votes.append(row)
            if log is not None:
                with open(log, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
        return JSONResponse({"recorded": True, "winner": winner, **names})

    @router.get(f"{API}/judges/report", summary="the judge report of the battles voted here (judge token)")
    async def report(request: Request):
        given = request.headers.get("authorization", "")[7:].strip()
        # the server's token reads the report too (the leaderboard page's admin view)
        if not (admin_token and given and secrets.compare_digest(given.encode(), admin_token.encode())):
            judge, refusal = await judge_of(request)
            if refusal is not None:
                return refusal
        with lock:
            rows = list(votes)
        if not rows:
            return JSONResponse({"judges": [], "detail": "no votes yet"})
        import pandas as pd

        from ...leaderboard.judges import judge_report
        try:
            answer = judge_report(pd.DataFrame(rows), draws=200)
        except ValueError as exc:  # too few votes for a fit, say
            return _refused(409, " ".join(str(exc).split()), "too_few")
        return JSONResponse(answer.to_dict())

    return router


def _expire(svc, ticket):
    try:
        svc.ranker.expire(ticket)
    except ValueError:  # told or expired already: nothing to undo
        pass


def _replay(log: Path, assigner: Assigner) -> list:
    rows = []
    for number, line in enumerate(log.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            assigner.record(row["judge"], row["question_id"], (row["model_a"], row["model_b"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{log}: line {number}: {exc}") from None
        rows.append(row)
    return rows
