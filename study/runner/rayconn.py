"""Joining or starting Ray for the study driver (no storage here; :mod:`study.runner.driver` drives).

* The embedded Ray (no ``--address``) binds every server to 127.0.0.1 and starts no dashboard, and
  is refused more CPUs than the machine has.  It keeps Ray's token authentication: with
  ``RAY_AUTH_MODE`` unset it is set to ``token`` (what Ray does by default, without Ray's advice to
  disable it); a user who sets ``RAY_AUTH_MODE`` decides.
* Joining a cluster probes the address over TCP first (an unreachable address fails within
  ``PROBE_SECONDS``, naming it) and, from the command line, gives ``ray.init`` 30 s.

``docs/cluster.md`` states what was measured, and what disabling Ray's authentication exposes.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
from dataclasses import dataclass, field


@dataclass
class RayConnection:
    """How the driver is connected: whether :func:`connect` started Ray here, the mode recorded in
    the manifest (``embedded``, ``cluster``, ...), and the cluster's resources."""

    started_here: bool
    mode: str
    resources: dict = field(default_factory=dict)


_CONNECTED: dict = {}  # job id of the driver connect() started -> how (recorded in manifests)


def _job_id(ray) -> str:
    return str(ray.get_runtime_context().get_job_id())


PROBE_SECONDS = 10.0  # TCP probe of a cluster address before ray.init


def probe_address(address: str, timeout: float | None = None):
    """Raise ``ConnectionError`` naming ``address`` unless a TCP connection to its host:port opens
    within ``timeout`` seconds ("auto" is resolved the way Ray does; other forms are not probed)."""
    timeout = PROBE_SECONDS if timeout is None else timeout
    text = str(address)
    if text == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address
            text = canonicalize_bootstrap_address("auto") or ""
        except Exception:  # noqa: BLE001 -- ray.init reports "no cluster" itself
            return
    if text.startswith("ray://"):
        text = text[len("ray://"):]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or "/" in text:
        return
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except socket.gaierror as exc:
        raise ConnectionError(f"could not connect to a Ray cluster at {address!r}: cannot resolve host "
                              f"{host!r} ({exc.strerror})") from None
    except socket.timeout:
        raise ConnectionError(f"could not connect to a Ray cluster at {address!r}: no answer from "
                              f"{host}:{port} within {timeout:.0f} s") from None
    except OSError as exc:
        raise ConnectionError(f"could not connect to a Ray cluster at {address!r}: {host}:{port}: "
                              f"{exc.strerror or exc}") from None


def _loopback_only():
    """Make the embedded Ray bind every server to 127.0.0.1: Ray binds its gRPC servers to loopback
    when its node IP is the loopback address, which is what it does on macOS/Windows unless
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER is set; setting it to 0 does the same on Linux (the
    variable is read by every Ray process started from here)."""
    _set_cluster_ip(False)


_LOOPBACK_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_LOOPBACK_SET: list = []  # the value this process had before _loopback_only(), once it ran


def _set_cluster_ip(enabled: bool):
    """``enabled=False``: node IP (and so every bind address) on loopback for Ray processes started
    from here; ``True``: undo that (joining a cluster later in the same process needs the real IP)."""
    if not enabled:
        if not _LOOPBACK_SET:
            _LOOPBACK_SET.append(os.environ.get(_LOOPBACK_VAR))
        os.environ[_LOOPBACK_VAR] = "0"
    elif _LOOPBACK_SET:
        previous = _LOOPBACK_SET.pop()
        if previous is None:
            os.environ.pop(_LOOPBACK_VAR, None)
        else:
            os.environ[_LOOPBACK_VAR] = previous
    else:
        return
    try:
        from ray._private import ray_constants
        ray_constants.ENABLE_RAY_CLUSTER = ray_constants.env_bool(_LOOPBACK_VAR, not ray_constants.IS_WINDOWS_OR_OSX)
    except Exception:  # noqa: BLE001 -- the variable alone works if ray is imported afterwards
        pass


def max_local_cpus() -> int:
    """The CPUs of this machine (an embedded Ray is refused more)."""
    return os.cpu_count() or 1


AUTH_HINT = ("if the cluster uses token authentication (the default of `ray start` once a token exists), set "
             "RAY_AUTH_MODE=token in this shell and make the cluster's token readable here (~/.ray/auth_token, "
             "RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN); docs/cluster.md")


def _keep_token_auth():
    """The embedded Ray keeps token authentication, quietly: Ray turns it on when RAY_AUTH_MODE is
    unset, printing advice to set RAY_AUTH_MODE=disabled; setting ``token`` explicitly is the same
    cluster without that advice (Ray creates ~/.ray/auth_token if it is missing, as it would)."""
    if "RAY_AUTH_MODE" in os.environ:  # the user decided
        return
    try:  # sets RAY_AUTH_MODE=token and refreshes Ray's cached configuration (read when ray was imported)
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
    except ImportError:  # a Ray without token authentication
        return
    _enable_token_auth()


def connect(address=None, num_cpus=None, log=print, init_timeout=None, runtime_env=None) -> RayConnection:
    """Join or start Ray.

    * already initialised in this process: reuse it (its mode is the one connect() used for it,
      e.g. "embedded" for every study of ``jobs/paper.py``; "existing" if someone else started it);
    * ``address`` given ("auto", "host:port", "ray://host:port"): join that cluster (a TCP probe
      first, so an unreachable address fails within ``PROBE_SECONDS`` naming it);
    * no address but ``RAY_ADDRESS`` set (inside ``ray job submit``): join the job's cluster;
    * otherwise start an embedded local Ray with ``num_cpus`` CPUs (all by default, at most the
      machine's), every server bound to 127.0.0.1, no dashboard.

    ``runtime_env`` (e.g. ``{"py_modules": ["/abs/mypkg"]}``) is given to ``ray.init``: how a
    user's module reaches the workers of a cluster.

    ``init_timeout`` (seconds; the command line gives 30): if joining a cluster has not
    succeeded by then (an address that accepts TCP but is no Ray GCS makes ``ray.init`` retry for
    minutes), print an error naming the address and end the process with status 1.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    embedded = address is None and not os.environ.get("RAY_ADDRESS")
    if embedded and num_cpus is not None and int(num_cpus) > max_local_cpus():
        raise ValueError(f"--num-cpus {num_cpus} exceeds this machine's {max_local_cpus()} CPUs (an embedded "
                         "Ray would start that many worker processes); give at most that, or join a cluster "
                         "with --address")
    import ray

    if ray.is_initialized():
        return RayConnection(False, _CONNECTED.get(_job_id(ray), "existing"), _resources(ray))
    if embedded:
        _loopback_only()
        _keep_token_auth()
    kwargs = {"include_dashboard": False, "log_to_driver": True}
    if runtime_env:
        kwargs["runtime_env"] = runtime_env
    if address is None and os.environ.get("RAY_ADDRESS"):
        address, mode = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    elif address is None:
        address, mode = "local", "embedded"
        if num_cpus is not None:
            kwargs["num_cpus"] = int(num_cpus)
    else:
        mode = "client" if str(address).startswith("ray://") else "cluster"
    if mode != "embedded":
        _set_cluster_ip(True)
        kwargs.pop("include_dashboard")
        if num_cpus is not None:
            log(f"note: --num-cpus is ignored when joining an existing cluster ({address})")
        probe_address(address)
        log(f"connecting to the Ray cluster at {address} ...")
    watchdog = _watchdog(address, init_timeout) if init_timeout and mode != "embedded" else None
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        auth = "" if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else f"; {AUTH_HINT}"
        raise ConnectionError(
            f"could not connect to a Ray cluster at {address!r}: {exc}{auth}\n"
            "Start one with `ray start --head` (same RAY_AUTH_MODE as this shell), or omit "
            "--address to run on an embedded local Ray.") from None
    finally:
        if watchdog is not None:
            watchdog.cancel()
    _CONNECTED[_job_id(ray)] = mode
    return RayConnection(True, mode, _resources(ray))


def _watchdog(address, seconds) -> threading.Timer:
    """A started timer that ends the process with status 1, naming ``address``, unless cancelled
    within ``seconds`` (``ray.init`` retries for minutes on an address that is no Ray GCS)."""
    def give_up():
        print(f"error: could not connect to a Ray cluster at {address!r}: no Ray answered within "
              f"{seconds:.0f} s (is it a Ray GCS address, and the same RAY_AUTH_MODE?); {AUTH_HINT}",
              file=sys.stderr, flush=True)
        os._exit(1)
    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    return timer


def _resources(ray) -> dict:
    """The cluster's resources (CPU, memory, ...) and the number of live nodes."""
    try:
        res = ray.cluster_resources()
        return {k: v for k, v in res.items() if not k.startswith("node:")} | {
            "nodes": len([n for n in ray.nodes() if n.get("Alive")])}
    except Exception:  # noqa: BLE001
        return {}
