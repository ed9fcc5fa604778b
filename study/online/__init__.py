"""The online ranker: ask which pair to compare for a prompt, tell the judges' outcome, read the
ranking with confidence intervals at any moment (the conventions of Optuna's ask-and-tell).

* :mod:`study.online.ranker`  :class:`Ranker`: the simulations' loop (same policies, estimator
  schedule, seeds and uniforms), run one ask and one tell (or batch of tells) at a time.
* :mod:`study.online.tickets` :class:`Ticket` (it carries its store's id) and outcomes.
* :mod:`study.online.state`   the loop's state, brought up to date from the store's rows and checkpoint.
* :mod:`study.online.snapshot` the estimator's whole state as a checkpoint (explicit, not pickle).
* :mod:`study.online.store`   the SQLite store (one file per ranker, one transaction per tell).
* :mod:`study.online.verify`  the store verified before it is trusted (schema, meta, every row).
* :mod:`study.online.audit`   :func:`verify_store`, the whole check of ``python -m study.online verify``.
* :mod:`study.online.config`  the creation arguments, stored and compared on reopening.
* :mod:`study.online.horizon` the horizon: fixed (the paper's), open (doubling epochs) or raised.
* :mod:`study.online.items`   models added to and retired from a live store.
* :mod:`study.online.report`  CIs, rankings and diagrams, each naming its standard errors.
* :mod:`study.online.export`  a store's told rows as a table (Parquet, CSV, JSON Lines) that
  ``python -m study.leaderboard`` reads back.
* :mod:`study.online.prior`   a ranker whose theta(0) is the fit of a file of earlier judgments.
* :mod:`study.online.judges`  judges with names (tokens stored hashed) and each tell's judge and side.
* :mod:`study.online.standings` the ranking read as a leaderboard (Elo-style scale, rank intervals).
* :mod:`study.online.service` the service room above the ranker, which never imports it: the
  client (:class:`Client`, the Ranker's methods over HTTP), the server (JSON API, live page,
  judging page) and ``python -m study.online serve``.
* ``python -m study.online show FILE``  counts, the ranking with CIs, the diagram as a PNG.
* ``python -m study.online verify FILE [--replay]``  is the file a store to trust?
* ``python -m study.online serve FILE [--host 127.0.0.1] [--port 8000]``  the ranker as a service.
* ``python -m study.online horizon FILE T``, ``items add|retire FILE NAME``  a live store's horizon
  and models.

See docs/online.md.
"""
from typing import TYPE_CHECKING

from .._util import lazy_exports

# Imported when first used (PEP 562): ``from study.online import Client`` imports the client
# (standard library and numpy) and not the ranker's scipy, pandas or matplotlib.
__getattr__, __dir__ = lazy_exports(__name__, {
    "verify_store": ".audit", "Client": ".service.client", "Config": ".config", "export_told": ".export",
    "told_rows": ".export", "ranker_from_judgments": ".prior", "Ranker": ".ranker", "Decision": ".stopping",
    "StoreError": ".store", "StoreFileError": ".store", "Ticket": ".tickets", "TicketError": ".tickets"})

if TYPE_CHECKING:
    from .audit import verify_store
    from .service.client import Client
    from .config import Config
    from .export import export_told, told_rows
    from .prior import ranker_from_judgments
    from .ranker import Ranker
    from .stopping import Decision
    from .store import StoreError, StoreFileError
    from .tickets import Ticket, TicketError

__all__ = ["Client", "Config", "Decision", "Ranker", "StoreError", "StoreFileError", "Ticket", "TicketError",
           "verify_store", "told_rows", "export_told", "ranker_from_judgments"]
