"""The floor's last line: no connection off this machine while an on-device attempt runs.

The checkpoint at the wire reads the URL LiteLLM will use and the proxy the environment
names (`core.checkpoint`). What it cannot read is the HTTP client LiteLLM already built:
httpx reads the proxy variables when a client is made, and LiteLLM keeps its clients, so
a client made while `HTTP_PROXY` was set sends through that proxy after the variable is
gone (measured, litellm 1.110.2, httpx). The guard closes that gap where bytes really
leave: while an on-device attempt is in flight in a thread or task, a Python audit hook
(`sys.addaudithook`) refuses every `socket.connect` and `socket.sendto` to an address that
is not this machine's loopback (or the host the route declared on-device), raising
`OffDeviceConnection` before the connection is made. The HTTP client reports it as a
failed connection; the router records the attempt as not sent.

The hook is added to the process the first time an on-device attempt is made (an audit
hook cannot be removed), and then costs one context-variable read per audited event
outside an attempt. It guards the attempt's own thread or task and the tasks it starts.

A connection a kept client already holds to a proxy makes no new `connect`: the request
would be written on it unseen. So before an on-device attempt `kept_proxy` asks every HTTP
client LiteLLM keeps (its client cache, its module-level clients, a session you gave it)
which transport it would use for the route's URL; one that goes through a proxy off this
machine stops the attempt, naming the proxy and the way out.

A redirect is the other way a kept connection carries a request off the machine unseen:
the OpenAI SDK's clients follow redirects, so a loopback server answering 307 to a host
elsewhere has the client keep a connection there, which the next request it redirects
reuses without a `connect`. `watch_kept` gives every kept client a request hook, once,
that refuses (with `OffDeviceConnection`) any request, a redirect's included, to a host
off this machine while an on-device attempt runs in that thread or task; outside one it
reads a context variable and returns. Both read the clients by their shape (a transport
chooser, event hooks), not by the class of one HTTP library, so httpx's and its
successors' clients are held alike.
"""

from __future__ import annotations

import contextvars
import inspect
import ipaddress
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...ground.outcome import OffDeviceConnection
from ...ground.reach import host_of, is_loopback
from ...ground.route import Route

__all__ = ["allowed_for", "install", "kept_proxy", "on_device", "watch_kept"]

_ALLOWED: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "policy_router_on_device", default=None
)
_INSTALLED = False
_LOCK = threading.Lock()


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect" and event != "socket.sendto":
        return
    allowed = _ALLOWED.get()
    if allowed is None:
        return
    address = args[-1]
    if not isinstance(address, tuple) or not address:
        return  # a Unix socket: this machine
    host = str(address[0])
    if host in allowed or _loopback(host):
        return
    raise OffDeviceConnection(
        f"on_device=True: a connection to {host}:{address[1] if len(address) > 1 else ''} "
        "was refused: it would leave this machine during an on-device attempt (an HTTP "
        "client LiteLLM keeps may use a proxy set when it was made; see docs/concepts/floor.md)"
    )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def install() -> None:
    """Add the guard's audit hook to the process, once (the first on-device attempt does)."""
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED = True


def allowed_for(route: Route) -> frozenset[str]:
    """The addresses off loopback an on-device attempt of `route` may connect to: those of
    the host it declared on-device (a machine of your own network), else none."""
    if not route.reach_declared:
        return frozenset()
    base = route.kwargs.get("api_base") or route.kwargs.get("base_url")
    host = host_of(str(base)) if base else None
    if not host or _loopback(host):
        return frozenset()
    try:
        return frozenset({host, *(str(info[4][0]) for info in socket.getaddrinfo(host, None))})
    except OSError:
        return frozenset({host})


@contextmanager
def on_device(allowed: frozenset[str]) -> Iterator[None]:
    """Guard this thread or task (and the tasks it starts) for the block's length."""
    if not _INSTALLED:
        install()
    token = _ALLOWED.set(allowed)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def _kept() -> Iterator[Any]:
    """Every HTTP client LiteLLM keeps, and the HTTP client inside each SDK client (an
    OpenAI client's `_client`), each once."""
    import litellm

    clients: list[Any] = []
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    held = getattr(cache, "cache_dict", None)
    if isinstance(held, dict):
        clients += list(held.values())
    for name in ("module_level_client", "module_level_aclient", "client_session", "aclient_session"):
        client = litellm.__dict__.get(name)  # not through the lazy getattr: never build one
        if client is not None:
            clients.append(client)
    seen: set[int] = set()
    for client in clients:
        for inner in (client, getattr(client, "_client", None), getattr(client, "client", None)):
            if inner is not None and id(inner) not in seen:
                seen.add(id(inner))
                yield inner


def kept_proxy(urls: list[str]) -> str | None:
    """The proxy off this machine through which an HTTP client LiteLLM keeps would carry a
    request to one of `urls` (as `host:port`), or None. Read from each client's own choice
    of transport for the URL (made in the client's own URL type); a client that chooses
    none of its own (aiohttp reads the environment per request, which the checkpoint reads
    too) is left to the checkpoint."""
    for client in _kept():
        pick = getattr(client, "_transport_for_url", None)
        base = getattr(client, "base_url", None)
        if not callable(pick) or base is None:
            continue
        make_url: Any = type(base)
        for url in urls:
            try:
                target = make_url(url if "://" in url else f"http://{url}")
                pool = getattr(pick(target), "_pool", None)
                proxy = getattr(pool, "_proxy_url", None)
            except Exception:
                continue
            host = getattr(proxy, "host", None)
            where = host.decode("ascii", "replace") if isinstance(host, bytes) else host
            if isinstance(where, str) and where and not is_loopback(where):
                return f"{where}:{getattr(proxy, 'port', '') or ''}"
    return None


def watch_kept() -> None:
    """Give every HTTP client LiteLLM keeps the request hook that refuses, during an
    on-device attempt, a request to a host off this machine: the redirects it follows on
    connections it already holds included (see the module docstring). Once per client;
    a client with no event hooks of its kind is left to the audit hook."""
    for client in _kept():
        hooks = getattr(client, "event_hooks", None)
        if not isinstance(hooks, dict):
            continue
        asynchronous = inspect.iscoroutinefunction(getattr(client, "send", None))
        hook = _arefuse_off_device if asynchronous else _refuse_off_device
        requests = list(hooks.get("request", ()))
        if hook not in requests:
            try:
                client.event_hooks = {**hooks, "request": [*requests, hook]}
            except (AttributeError, TypeError):
                continue


def _refuse_off_device(request: Any) -> None:
    allowed = _ALLOWED.get()
    if allowed is None:
        return
    url = getattr(request, "url", None)
    host = getattr(url, "host", None)
    host = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host or "")
    if not host or host in allowed or is_loopback(host):
        return
    raise OffDeviceConnection(
        f"on_device=True: a request to {host} was refused: it would leave this machine "
        "during an on-device attempt (a redirect from the route's server, followed by an "
        "HTTP client LiteLLM keeps)"
    )


async def _arefuse_off_device(request: Any) -> None:
    _refuse_off_device(request)
