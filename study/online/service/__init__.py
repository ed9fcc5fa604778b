"""The service room above the ranker: the HTTP service, its pages and its client.  The ranker
(:mod:`study.online.ranker`, its store and its statistics) is a library that never imports this
package (``tests/test_architecture.py`` checks it); this package uses the ranker.

* :mod:`study.online.service.client`  :class:`~study.online.Client`: the Ranker's methods over HTTP
  (standard library and numpy only: a judge's process imports nothing heavy).
* :mod:`study.online.service.server`  the JSON API and the live page (FastAPI):
  :mod:`~study.online.service.api` its bodies, :mod:`~study.online.service.worker` the ranker in
  its own thread and the server's reads of it, :mod:`~study.online.service.arena_routes` judges
  with names and the battle log, :mod:`~study.online.service.hardening` what keeps it safe from
  the network.
* :mod:`study.online.service.serve`  ``python -m study.online serve STORE``.
* The judging page for people: :mod:`~study.online.service.pool` (prompts with responses, and
  the rule that picks the next one), :mod:`~study.online.service.render` (responses as sanitised
  HTML), :mod:`~study.online.service.judge_routes` (its routes),
  :mod:`~study.online.service.judging_log` (its battle log beside the store).
* ``static/``  the pages' HTML, JavaScript and CSS (package data; nothing is loaded from elsewhere).

This ``__init__`` imports nothing, so that ``from study.online import Client`` stays light.
"""
