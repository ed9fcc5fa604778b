"""The online ranker: ask which pair to compare for a prompt, tell the judges' outcome, read the
ranking with confidence intervals at any moment (the conventions of Optuna's ask-and-tell).

* :mod:`study.online.ranker`  :class:`Ranker` and :class:`Ticket`: the simulations' loop (same
  policies, estimator schedule, seeds and uniforms), run one ask and one tell at a time.
* :mod:`study.online.store`   the SQLite store (one file per ranker, one transaction per tell).
* :mod:`study.online.config`  the creation arguments, stored and compared on reopening.
* :mod:`study.online.report`  CIs, rankings and diagrams, each naming its standard errors.
* ``python -m study.online show FILE``  counts, the ranking with CIs, the diagram as a PNG.

See docs/online.md.
"""
from .config import Config
from .ranker import Ranker
from .store import StoreError, StoreFileError
from .tickets import Ticket

__all__ = ["Config", "Ranker", "StoreError", "StoreFileError", "Ticket"]
