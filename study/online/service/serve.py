"""``python -m study.online serve STORE``: one process owns the store and serves it over HTTP
(:mod:`study.online.service.server`) until stopped (Ctrl-C, SIGTERM).

The store is created from the flags or a settings file (a JSON object of the
:class:`~study.online.Ranker`'s creation arguments) when it does not exist, and reopened (verified,
continued) otherwise; arguments given for an existing store must equal the stored ones.

The token: the environment variable ``STUDY_ONLINE_TOKEN`` if set, else the file ``STORE.token``
beside the store, written at the first start (random, 256 bits, readable by its owner only: a
token file that others can read is refused).  Ask, tell, tell_many and expire need it; reads need
it too unless the server listens on loopback (the default, 127.0.0.1) or ``--open-reads`` is given.

``--prompts FILE --responses FILE``: a pool of prompts with responses (:func:`study.online.service.pool.read_pool`;
``--category COLUMN`` takes the contexts from a category of the prompts) and the judging page at
``/judge`` (:mod:`study.online.service.judge_routes`), for the judges named by ``python -m study.online judges
add STORE NAME`` with their own tokens.  A new store's items and d are the pool's models and context
dimension unless given; an existing store's must hold every model of the pool and have its d.  Bad
files are refused in one line before anything is served.  The battle log of the page is appended to
``STORE.judging.jsonl`` (:func:`judging_log`).
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import stat
import sys
from pathlib import Path

from ..standings import MIN_JUDGMENTS
from .client import TOKEN_ENV
from .hardening import (HEADER_TIMEOUT, WILDCARDS, allowed_hosts, check_token, http_protocol, lock_store, note_holder,
                        reachable)
from .hardening import MAX_BODY, is_loopback

CREATION = ("n_items", "dim", "policy", "T", "T0", "M", "alpha", "gamma", "c_lambda", "tie_break", "seed", "edges",
            "items", "theta0")


def token_file(store) -> Path:
    store = Path(store)
    return store.with_name(store.name + ".token")


def server_token(store, environ=os.environ) -> tuple:
    """(token, where it is): ``STUDY_ONLINE_TOKEN``, or the token file beside the store (written,
    0600, at the first start).  ValueError for a token file others can read, or an empty one."""
    if environ.get(TOKEN_ENV, "").strip():
        return check_token(environ[TOKEN_ENV], TOKEN_ENV), f"the environment variable {TOKEN_ENV}"
    path = token_file(store)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ValueError(f"{path}: the token file is readable by others (mode {mode:o}); chmod 600 {path}") from None
        token = path.read_text().strip()
        if len(token) < 16:
            raise ValueError(f"{path}: the token file holds no token of at least 16 characters") from None
        return token, str(path)
    token = secrets.token_urlsafe(32)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(token + "\n")
    return token, str(path)


def judging_log(store) -> Path:
    """The judging page's battle log beside the store (JSON Lines: each vote with the pool's
    question id and its ticket; the re-served battles)."""
    store = Path(store)
    return store.with_name(store.name + ".judging.jsonl")


def add_arguments(parser) -> None:
    parser.add_argument("file", type=Path, help="the ranker's SQLite store (created if absent)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine "
                                                            "only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port, printed)")
    parser.add_argument("--open-reads", action="store_true",
                        help="reads (the page, rankings, exports) need no token on a non-loopback address either")
    parser.add_argument("--max-body", type=int, default=MAX_BODY,
                        help=f"largest request body in bytes, refused with 413 beyond (default {MAX_BODY:,})")
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME", dest="allow_host",
                        help="also answer requests whose Host header is NAME (a reverse proxy's name; repeat it; '*': "
                             "any). By default: loopback names, the --host address and, on 0.0.0.0, this machine's "
                             "names and addresses")
    parser.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT, dest="header_timeout",
                        help=f"seconds a connection has to send a request's headers, and a body between its pieces "
                             f"(default {HEADER_TIMEOUT:g}); slower ones are closed (408 for a body)")
    parser.add_argument("--min-judgments", type=int, default=MIN_JUDGMENTS, dest="min_judgments",
                        help=f"items with fewer judgments are marked preliminary on the page and in GET ranking "
                             f"(default {MIN_JUDGMENTS}; a query can ask for another)")
    judging = parser.add_argument_group("the judging page (/judge)")
    judging.add_argument("--prompts", type=Path, help="prompts: question_id, prompt, optional category (JSONL, CSV, "
                                                      "Parquet)")
    judging.add_argument("--responses", type=Path, help="responses: question_id, model, response")
    judging.add_argument("--category", help="a column of the prompts whose value is each prompt's context "
                                            "(default: x = 1)")
    judging.add_argument("--overlap", type=float, default=0.1,
                         help="share of battles re-served to a second judge, for agreement (default 0.1)")
    new = parser.add_argument_group("creating a store (for an existing one, values given must equal the stored ones)")
    new.add_argument("--settings", type=Path, help="a JSON object of the Ranker's creation arguments "
                                                   "(n_items, dim, items, policy, T, T0, M, seed, edges, ...)")
    new.add_argument("--items", nargs="+", help="the items' names (n = their number)")
    new.add_argument("--n-items", type=int, dest="n_items", help="n, when the items have no names")
    new.add_argument("--dim", type=int, help="d, the context dimension")
    new.add_argument("--policy", help="a method (default RB)")
    for name, kind in (("T", int), ("T0", int), ("M", int), ("alpha", float), ("gamma", float),
                       ("c-lambda", float), ("seed", int)):
        new.add_argument(f"--{name}", type=kind, dest=name.replace("-", "_"), help=f"as Ranker's {name.replace('-', '_')}")
    new.add_argument("--tie-break", dest="tie_break", help="as Ranker's tie_break")


def creation_arguments(args) -> dict:
    """The creation arguments of the flags and the settings file (a key given by both, with two
    values, is a ValueError)."""
    given = {k: getattr(args, k) for k in CREATION if getattr(args, k, None) is not None}
    if args.settings is None:
        return given
    try:
        settings = json.loads(args.settings.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--settings {args.settings}: {exc}") from None
    if not isinstance(settings, dict):
        raise ValueError(f"--settings {args.settings}: a JSON object of creation arguments, got {type(settings).__name__}")
    unknown = sorted(set(settings) - set(CREATION))
    if unknown:
        raise ValueError(f"--settings {args.settings}: unknown argument {unknown[0]!r} (known: {', '.join(CREATION)})")
    for key, value in settings.items():
        if key in given and given[key] != value:
            raise ValueError(f"{key} is given by a flag ({given[key]!r}) and by --settings ({value!r})")
    return {**settings, **given}


def reads_need_the_token(host: str, open_reads: bool) -> bool:
    """Reads are open on loopback; elsewhere they need the token, unless ``--open-reads``."""
    return not is_loopback(host) and not open_reads


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the app starts (so that ``--port 0`` can print its port).
    Declared TCP (proto IPPROTO_TCP), else asyncio leaves Nagle's algorithm on for its connections
    and every kept-alive request waits 40 ms for a delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def stopped(number, frame):
    raise SystemExit(0)


def serve(args) -> int:
    if not 1 <= args.max_body:
        print(f"error: --max-body must be at least 1, got {args.max_body}", file=sys.stderr)
        return 2
    if args.min_judgments < 0:
        print(f"error: --min-judgments must be at least 0, got {args.min_judgments}", file=sys.stderr)
        return 2
    if not 0 < args.header_timeout < 3600:
        print(f"error: --header-timeout must lie in (0, 3600) seconds, got {args.header_timeout}", file=sys.stderr)
        return 2
    if (args.prompts is None) != (args.responses is None):
        print("error: --prompts and --responses go together (the judging page needs both)", file=sys.stderr)
        return 2
    if not 0.0 <= args.overlap < 1.0:
        print(f"error: --overlap must lie in [0, 1), got {args.overlap}", file=sys.stderr)
        return 2
    pool = None
    if args.prompts is not None:
        from .pool import read_pool

        try:  # the files refused before the store is touched
            pool = read_pool(args.prompts, args.responses, category=args.category)
        except (ValueError, OSError) as exc:
            print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    try:
        if os.environ.get(TOKEN_ENV, "").strip():  # a bad token refused before the store is touched
            check_token(os.environ[TOKEN_ENV], TOKEN_ENV)
        lock = lock_store(args.file)  # before the store is opened: a second server changes nothing
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return served(args, lock, pool)
    finally:
        lock.close()  # released (the kernel would release it too, however this process ends)


def fits(pool, config) -> None:
    """ValueError (one line) where the store cannot serve the pool: a model it lacks, another d."""
    missing = sorted(set(pool.models) - set(config.labels))
    if missing:
        raise ValueError(f"--responses: model {missing[0]!r} is no item of the store (its items: "
                         f"{', '.join(config.labels)}; add it: python -m study.online items add STORE NAME)")
    if pool.contexts.shape[1] != config.dim:
        raise ValueError(f"--prompts: the pool's contexts have d = {pool.contexts.shape[1]}, the store's d = "
                         f"{config.dim}")


def served(args, lock, pool=None) -> int:
    import uvicorn  # the server's modules, once a server is to run (``--help`` and refusals stay quick)

    from ..ranker import Ranker
    from ..store import StoreFileError
    from .server import create_app
    from .worker import Service

    try:
        given = creation_arguments(args)
        if pool is not None and not args.file.exists() and "items" not in given and "n_items" not in given:
            given = {"items": pool.models, "dim": pool.contexts.shape[1], **given}  # a new store: the pool's
        if not args.file.exists() and not given:
            raise ValueError(f"{args.file} does not exist: give its creation arguments (--items or --n-items, --dim, "
                             "...) or --settings FILE")
        service = Service(lambda: Ranker(args.file, **given))
        service.open()  # verified (or created) in the ranker's thread, before anything is served
    except (ValueError, StoreFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if pool is not None:
            fits(pool, service.ranker.config)
    except ValueError as exc:
        service.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        token, where = server_token(args.file)
        sock = listening_socket(args.host, args.port)
    except (ValueError, OSError) as exc:
        service.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reads_need_token = reads_need_the_token(args.host, args.open_reads)
    app = create_app(service, token=token, reads_need_token=reads_need_token, max_body=args.max_body,
                     allowed_hosts=allowed_hosts(args.host, args.allow_host), body_timeout=args.header_timeout,
                     min_judgments=args.min_judgments, pool=pool,
                     judging_log=None if pool is None else judging_log(args.file), overlap=args.overlap)
    ranker = service.ranker
    host, port = sock.getsockname()[:2]
    local = ("::1" if ":" in host else "127.0.0.1") if host in WILDCARDS else host  # 0.0.0.0 is no address to open
    url = f"http://{f'[{local}]' if ':' in local else local}:{port}/"
    note_holder(lock, f"pid {os.getpid()}, {url}")
    c = ranker.config
    told = service.n_told
    print(f"serving {args.file} ({c.n_items} items, d = {c.dim}, policy {c.policy}, {told} told) at {url}\n"
          f"  the page: {url}   the API: {url}api/v1/ (schema: {url}api/v1/openapi.json)\n"
          + (f"  judging: {url}judge#token=JUDGE_TOKEN ({pool.summary()}; judges: python -m study.online judges "
             f"add {args.file} NAME)\n" if pool is not None else "") +
          f"  token: {where} (ask, tell and expire need it; reads "
          f"{'need it too' if reads_need_token else 'do not'})", flush=True)
    others = reachable(host, port)
    if others:
        print(f"  from other machines: {'   '.join(others)}" + (f" (listening on every interface, {host})"
                                                             if host in WILDCARDS else ""), flush=True)
    elif host in WILDCARDS:  # a machine with no name or route out: say so rather than print nothing
        print(f"  from other machines: no address of this machine found (listening on every interface, {host}); "
              f"open http://ADDRESS:{port}/ with --allow-host ADDRESS", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=args.access_log, lifespan="on",
                            http=http_protocol(args.header_timeout, keep_alive=30.0),
                            timeout_keep_alive=30)  # the lifespan's end closes the store
    for number in (signal.SIGINT, signal.SIGTERM):  # uvicorn shuts down gracefully, then raises the signal
        signal.signal(number, stopped)            # again with these handlers back: exit 0, the store closed
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
