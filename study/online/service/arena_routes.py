"""The arena's routes of the service: judges with names and the battle log (a FastAPI
``APIRouter`` that :func:`study.online.service.server.create_app` includes).

=====================  ========================================================================
POST judges            ``{"name"}`` -> ``{"name", "token"}``: a new judge (the token shown once)   (admin)
GET  judges            every judge: name, created, revoked, tells                                  (admin)
POST judges/revoke     ``{"name"}``: its token refused from now on                                (admin)
POST items             ``{"name"}`` -> ``{"name", "item"}``: a model added (explored first)       (admin)
POST items/retire      ``{"name"}``: the item never asked again, kept in the table (retired)     (admin)
GET  battles           the battle log (:mod:`study.online.export`), ``format`` jsonl (default),
                       csv or parquet, tells after seq ``after``: what ``study.leaderboard`` reads
=====================  ========================================================================

The admin token is the server's token (the store's shared one); a judge's token is accepted where
the server's is, except on the admin routes (:data:`ADMIN`), and the tells it makes carry the
judge's name (:func:`judge_of`, called by the server's token gate; the gate puts the name in the
request's ``state.judge``).
"""
from __future__ import annotations

import io
from typing import Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from .. import items, judges
from ..export import battle_rows, write_as
from .api import PREFIX as P

ADMIN = frozenset((f"{P}/judges", f"{P}/judges/revoke", f"{P}/items", f"{P}/items/retire"))
MEDIA = {"jsonl": "application/x-ndjson", "csv": "text/csv", "parquet": "application/vnd.apache.parquet"}


class JudgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str


async def judge_of(service, token: str):
    """The name of the judge whose token ``token`` is (None: no judge's, or revoked), read in the
    ranker's thread."""
    if service.ranker is None:
        return None
    return await service.call(judges.who, service.ranker, token)


def router(service) -> APIRouter:
    """The routes of the module docstring over ``service`` (a :class:`~study.online.service.worker.Service`)."""
    routes = APIRouter(prefix=P)

    async def on_ranker(answer):
        """``answer(ranker)`` on the ranker's thread; a refusal (ValueError) is a 409 naming it."""
        def work():
            try:
                return answer(service.ranker)
            except ValueError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=409)

        return await service.call(work)

    @routes.post("/judges", summary="a new judge: its token, shown once (admin token)")
    async def add_judge(body: JudgeRequest):
        return await on_ranker(lambda ranker: {"name": body.name, "token": judges.add(ranker, body.name)})

    @routes.get("/judges", summary="every judge (admin token)")
    async def list_judges():
        return await service.call(judges.listing, service.ranker)

    @routes.post("/judges/revoke", summary="refuse a judge's token from now on (admin token)")
    async def revoke_judge(body: JudgeRequest):
        def revoke(ranker):
            judges.revoke(ranker, body.name)
            return {"name": body.name, "revoked": True}

        return await on_ranker(revoke)

    @routes.post("/items", summary="add an item (a model) to the live store (admin token)")
    async def add_item(body: JudgeRequest):
        return await on_ranker(lambda ranker: {"name": body.name, "item": items.add(ranker, body.name)})

    @routes.post("/items/retire", summary="retire an item from the asks; its rows and its row in the table stay "
                                          "(admin token)")
    async def retire_item(body: JudgeRequest):
        return await on_ranker(lambda ranker: {"name": body.name, "retired": True,
                                               "from_ask": items.retire(ranker, body.name)})

    @routes.get("/battles", summary="the battle log, as study.leaderboard reads it")
    async def battles(format: Literal["jsonl", "csv", "parquet"] = "jsonl", after: int = Query(0, ge=0, le=2 ** 62)):
        frame = await service.call(battle_rows, service.ranker, after)
        buffer = io.BytesIO()
        write_as(frame, buffer, format)
        return Response(buffer.getvalue(), media_type=MEDIA[format],
                        headers={"Content-Disposition": f'attachment; filename="battles.{format}"'})

    return routes
