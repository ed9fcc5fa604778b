"""The JSON bodies of the ranker's HTTP API (:mod:`study.online.service.server`), as pydantic models: they
validate what comes in (a bad field is a 422 naming it) and make the OpenAPI schema.

Every number that names a count is a JSON integer (``1.0`` or ``true`` is refused), every real a
finite JSON number; unknown fields are refused (a misspelt ``"win": 1`` is a 422, not a silent
default).  Values the JSON cannot hold (NaN: no interval yet) are ``null``.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ...core import _validate as check
from .client import API_VERSION as VERSION, PREFIX  # noqa: F401 (the version and prefix of these models)

MAX_INT = 2**63 - 1  # SQLite's integers: a larger ticket or count is a 422, not an overflow inside the store
Real = Annotated[float, Field(allow_inf_nan=False)]
Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-check.MAX_ABS_CONTEXT, le=check.MAX_ABS_CONTEXT)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_INT)]
TicketId = Annotated[StrictInt, Field(ge=1, le=MAX_INT, description="the ticket's id: its ask index t, 1-based")]
StoreId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$", description="the store that handed the ticket out")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- requests -------------------------------------------------------------------------------------
class AskRequest(Strict):
    x: list[Coordinate] = Field(description="the context: d finite numbers within +-1e100")


class Outcome(Strict):
    """One told outcome: ``wins`` of the ``m`` comparisons (default M) won outright by the ticket's
    ``other``, ``ties`` of them tied.  ``store_id``, ``major`` and ``other``, when given (the
    client sends them back from the ticket), must be the ticket's: a ticket of another store, or
    for another pair, is refused with 409."""

    ticket: TicketId
    wins: Count
    m: Optional[Annotated[StrictInt, Field(ge=1, le=MAX_INT)]] = None
    ties: Count = 0
    store_id: Optional[StoreId] = None
    major: Optional[Count] = None
    other: Optional[Count] = None
    side: Optional[Literal["major", "other"]] = None  # which of the pair the judge was shown first
    bothbad: Count = 0  # how many of the ties were "both bad"


class TellManyRequest(Strict):
    outcomes: list[Outcome] = Field(description="applied in this order, in one transaction: all or none")


class ExpireRequest(Strict):
    """Either a ticket (its id, with its store_id and pair when known) or ``older_than`` seconds."""

    ticket: Optional[TicketId] = None
    store_id: Optional[StoreId] = None
    major: Optional[Count] = None
    other: Optional[Count] = None
    older_than: Optional[Annotated[float, Field(allow_inf_nan=False, ge=0.0)]] = None


class DiagramRequest(Strict):
    contexts: list[list[Coordinate]] = Field(min_length=1, description="Q contexts, each of length d")
    uncertainty: StrictBool = True
    level: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.95
    threshold: Annotated[float, Field(gt=0.0, le=1.0)] = 0.95
    se: Literal["model", "sandwich"] = "model"
    image: Optional[Literal["svg", "png"]] = Field(None, description="also draw it, as SVG or PNG (base64)")


# --- responses ------------------------------------------------------------------------------------
class TicketModel(BaseModel):
    id: int
    major: int
    other: int
    x: list[float]
    explored: bool
    told_before: int
    asked_at: float
    major_name: str
    other_name: str
    store_id: Optional[str]


class Told(BaseModel):
    ticket: int = Field(description="the ticket told")
    seq: int = Field(description="its place in the estimate (1-based)")
    n_told: int


class ToldMany(BaseModel):
    told: int
    first_seq: Optional[int] = Field(description="seq of the first outcome of the batch (null for an empty one)")
    n_told: int


class Expired(BaseModel):
    expired: int


class Refusal(BaseModel):
    """A refused request (401, 403, 404, 409, 413, 503): nothing was changed."""

    detail: str
    reason: Optional[str] = Field(None, description="404/409: never_asked, told, expired, other_store, pair, horizon")
    ticket: Optional[int] = None
    outcome: Optional[int] = Field(None, description="the refused outcome's place in a tell_many batch")
    stored: Optional[dict] = Field(None, description="409 told: the outcome stored for the ticket (seq, wins, ties, "
                                                     "m)")
    same_outcome: Optional[bool] = Field(None, description="409 told: whether the refused outcome equals the stored "
                                                           "one (a retried tell whose first try was recorded)")


class Counts(BaseModel):
    asked: int
    told: int
    open: int
    expired: int
    comparisons: int
    ties: int


class State(BaseModel):
    store_id: Optional[str]
    n_told: int
    n_asked: int
    counts: Counts
    n_items: int = Field(description="the items, retired ones included (a model added changes it)")
    n_retired: int = Field(description="the items retired so far (the page redraws its table when it changes)")


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    api: str


class ConfigModel(BaseModel):
    store: str
    store_id: Optional[str]
    n_items: int
    dim: int
    items: list[str]
    policy: str
    T: int
    T0: int
    M: int
    alpha: float
    gamma: float
    c_lambda: float
    tie_break: str
    edges: Optional[list[list[int]]]
    reads_need_token: bool = Field(description="whether reads need the token too")
    min_judgments: Optional[int] = Field(None, description="GET ranking's default: fewer judgments mark an item "
                                                           "preliminary")
    open_horizon: bool = Field(False, description="an open horizon: epochs doubling from T, no last ask")
    limit: Optional[int] = Field(None, description="the last ask allowed (the horizon, raised or not); null: open")
    retired: list[str] = Field([], description="the items retired from the asks (kept in the table)")
    judging: bool = Field(False, description="whether the judging page (/judge) and GET judges/report are served")


class RankingRow(BaseModel):
    rank: int
    item: int
    name: str
    score: float = Field(description="x'theta^d_i (the debiased estimate: the interval's centre and the order); "
                                     "the estimate while there are no intervals")
    se: Optional[float]
    lower: Optional[float]
    upper: Optional[float]
    estimate: float = Field(description="x'theta_i, the current fit the policy acts on")
    level: float
    anytime: bool
    se_method: str
    rank_lower: Optional[int] = Field(None, description="its simultaneous rank interval (null: no intervals yet, "
                                                        "or ranks=false)")
    rank_upper: Optional[int] = None
    rank_ub: Optional[int] = Field(None, description="LMArena's Rank (UB): 1 + the items whose lower bound exceeds "
                                                     "this one's upper bound (marginal intervals)")
    judgments: Optional[int] = Field(None, description="comparisons told that involve the item")
    preliminary: Optional[bool] = Field(None, description="fewer judgments than min_judgments")
    retired: bool = Field(False, description="retired from the asks (python -m study.online items retire); its "
                                            "told rows still count")


class ItemStats(BaseModel):
    item: int
    name: str
    judgments: int = Field(description="comparisons told that involve the item")
    wins: float = Field(description="of them won by the item (a tie half)")
    win_rate: Optional[float]


class Ranking(BaseModel):
    x: list[float]
    level: float
    anytime: bool
    se_method: str
    score: Literal["debiased", "estimate"]
    n_told: int
    rows: list[RankingRow]
    items: list[ItemStats]
    scale: Literal["logit", "elo"] = "logit"
    scale_text: Optional[str] = Field(None, description="the scale and its anchor, in words")
    anchor: Optional[str] = None
    anchor_rating: Optional[float] = None
    min_judgments: Optional[int] = None
    rank_interval: Optional[str] = Field(None, description="what the rank intervals are, in words")


class IntervalRow(BaseModel):
    item: int
    name: str
    dim: int
    estimate: float
    se: float
    lower: float
    upper: float
    level: float
    anytime: bool
    se_method: str


class Intervals(BaseModel):
    n_told: int
    rows: list[IntervalRow]


class DecisionModel(BaseModel):
    decided: bool
    top: list[int]
    top_names: list[str]
    margin: Optional[float]
    closest: list[int]
    closest_names: list[str]
    pair_level: float
    level: float
    anytime: bool
    judgments: int
    words: str
    x: list[float]
    n_told: int


class Estimate(BaseModel):
    n_told: int
    theta: list[list[float]]


class ToldRow(BaseModel):
    seq: int
    ticket: int
    major: int
    other: int
    major_name: str
    other_name: str
    x: list[float]
    wins: int
    ties: int
    m: int
    told_at: float


class ToldPage(BaseModel):
    rows: list[ToldRow]
    n_told: int
    next_after: Optional[int] = Field(description="pass as `after` for the next page (null: no more rows)")


class Timeline(BaseModel):
    points: list[list[float]] = Field(description="(told_at, seq) pairs, at most `points` of them, the last tell last")
    n_told: int


class Diagram(BaseModel):
    adjacency: list[list[int]]
    image_format: Optional[str]
    image: Optional[str] = Field(description="base64 (PNG) or the SVG text")
