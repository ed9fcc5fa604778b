"""What keeps a served store safe from the network around it (:mod:`study.online.service.serve`).

* :class:`HostGate`: a request whose ``Host`` header names no address this server answers to is
  refused (400) before any route runs, so that a page of another site whose name was made to
  resolve to 127.0.0.1 (DNS rebinding) cannot read a loopback server.  Allowed by default: the
  loopback names, plus the address it listens on and, on every interface, this machine's names and
  addresses; more with ``--allow-host`` (``*``: any).
* :func:`timed_protocol`: uvicorn's HTTP protocol with a deadline for a request's headers (a
  connection that opens and sends nothing, or half a request, is closed after it), and
  :class:`SlowBody`: a body that stops coming is refused (408) after the same deadline.
* :func:`lock_store`: one server per store, refused at start with one line when another holds it
  (an ``flock`` the kernel releases when its process ends, however it ends: never stale).
* :func:`check_token`: a token shorter than :data:`MIN_TOKEN` characters is refused.
* :func:`reachable`: the addresses judges on other machines can open when it listens on every
  interface (``0.0.0.0`` is where it listens, not an address to open).
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from pathlib import Path

MAX_BODY = 1 << 20  # bytes of a request body (tell_many of some 15,000 outcomes)
MIN_TOKEN = 16  # characters: a guessable token is no token
HEADER_TIMEOUT = 10.0  # seconds for a request's headers, and between the pieces of a body
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def check_token(token: str, where: str) -> str:
    """``token`` stripped; ValueError naming ``where`` when it is shorter than :data:`MIN_TOKEN`."""
    token = token.strip()
    if len(token) < MIN_TOKEN:
        raise ValueError(f"{where}: a token needs at least {MIN_TOKEN} characters, got {len(token)} (make one with "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


# --- Host ----------------------------------------------------------------------------------------
def host_name(header: str) -> str:
    """The name of a ``Host`` header without its port, lower case (``[::1]:8000`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header


def machine_addresses() -> list:
    """This machine's names and non-loopback addresses, as best the standard library can tell:
    its host name, its fully qualified name, what they resolve to, and the address of the route
    out (a UDP socket "connected" to a documentation address: no packet is sent)."""
    names = []
    for name in (socket.gethostname(), socket.getfqdn()):
        if name and name not in names:
            names.append(name)
    addresses = []
    for name in list(names):
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except OSError:
            continue
        addresses += [info[4][0] for info in infos]
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                addresses.append(udp.getsockname()[0])
        except OSError:
            pass
    out = [n for n in names if n.lower() != "localhost"]
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            continue
        if not (ip.is_loopback or ip.is_link_local) and str(ip) not in out:
            out.append(str(ip))
    return out


def is_loopback(host: str) -> bool:
    """Does ``host`` (an address or ``localhost``) listen on loopback only?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, extra=()) -> list:
    """The ``Host`` names a server listening on ``host`` answers to: loopback, ``host`` itself,
    this machine's names and addresses when it listens on every interface, and ``extra``."""
    allowed = list(LOOPBACK_NAMES)
    if host not in WILDCARDS:
        allowed.append(host.lower())
    else:
        allowed += machine_addresses()
    for name in extra:
        name = name if name == "*" else host_name(name)
        if name not in allowed:
            allowed.append(name)
    return allowed


def reachable(host: str, port: int) -> list:
    """The URLs to open this server at from another machine (none for loopback)."""
    if host in WILDCARDS:
        names = machine_addresses()
    elif host in LOOPBACK_NAMES or host.startswith("127."):
        names = []
    else:
        names = [host]
    return [f"http://{f'[{n}]' if ':' in n else n}:{port}/" for n in names]


class HostGate:
    """ASGI middleware: a request whose ``Host`` is not in ``allowed`` is refused with 400 (a
    missing Host too: HTTP/1.1 requires it).  ``"*"`` in ``allowed`` lets any through."""

    def __init__(self, app, allowed):
        self.app, self.allowed = app, frozenset(h.lower() for h in allowed)
        self.any = "*" in self.allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.any:
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host_name(header) not in self.allowed:
            from starlette.responses import JSONResponse

            detail = (f"Host {header[:100]!r} is not a name this server answers to (a page of another site must "
                      "not read it); the server's operator can add it with serve --allow-host NAME")
            return await JSONResponse({"detail": detail}, status_code=400)(scope, receive, send)
        await self.app(scope, receive, send)


# --- slow requests -------------------------------------------------------------------------------
def timed_protocol(base, seconds: float, keep_alive: float):
    """uvicorn's HTTP protocol class ``base`` with deadlines: a new connection has ``seconds`` to
    send a request's headers, a kept-alive one ``max(seconds, keep_alive)`` after its last answer;
    a connection with no request in hand at its deadline is closed (uvicorn itself waits for
    headers forever: enough half-open connections use up the server's file descriptors)."""

    class Timed(base):
        _deadline = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm(seconds)

        def _arm(self, delay: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(delay, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def on_response_complete(self):
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm(max(seconds, keep_alive))

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

        def _too_slow(self) -> None:
            self._deadline = None
            idle = self.cycle is None or self.cycle.response_complete  # no request in hand
            if idle and not self.transport.is_closing():
                self.transport.close()

    Timed.__name__ = Timed.__qualname__ = f"Timed{base.__name__}"
    return Timed


def http_protocol(seconds: float = HEADER_TIMEOUT, keep_alive: float = 30.0):
    """The protocol class for ``uvicorn.Config(http=...)``: uvicorn's own (httptools when
    installed, else h11), with :func:`timed_protocol`'s deadlines."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # no httptools: uvicorn's pure-Python h11 protocol
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return timed_protocol(base, seconds, keep_alive)


class SlowBody:
    """ASGI middleware: a request body whose next piece does not come within ``seconds`` is
    refused with 408 (the route never sees half a body)."""

    def __init__(self, app, seconds: float = HEADER_TIMEOUT):
        self.app, self.seconds = app, seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        done = False

        async def timed():
            nonlocal done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.seconds)
            except asyncio.TimeoutError:
                from starlette.exceptions import HTTPException
                raise HTTPException(408, f"the request body stopped coming for {self.seconds:g} s") from None
            done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)


# --- one server per store ------------------------------------------------------------------------
def lock_file(store) -> Path:
    store = Path(store)
    return store.with_name(store.name + ".serve.lock")


def lock_store(store):
    """The open lock file of ``store``, held (``flock``) by this process until it closes it or
    ends; ValueError, naming the holder, when another server holds it."""
    import fcntl

    path = lock_file(store)
    try:
        handle = open(path, "a+")
    except OSError as exc:
        raise ValueError(f"{path}: cannot create the server's lock file ({exc.strerror})") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ValueError(f"{store} is already served ({holder}): one server per store; stop that one first, or "
                         f"serve another store") from None
    note_holder(handle, f"pid {os.getpid()}")
    return handle


def note_holder(handle, text: str) -> None:
    """Write who holds the lock (read by the refused second server) into its file."""
    handle.seek(0)
    handle.truncate()
    handle.write(text + "\n")
    handle.flush()
