"""`policy-router serve`: the app on a port, in one process or several.

The file is read and the port bound before anything is served (`serve`), so a mistake
exits before "serving" is printed. With `--workers N`, uvicorn's supervisor runs N worker
processes on the one socket (`worker`), each with its own router over the store the file
names; their Prometheus numbers meet in one directory (prometheus-client's multiprocess
mode), so any of them answers a scrape for all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config.policy_file import load
from ..ground.errors import ConfigError
from .app import KEEP_ALIVE, create_app

__all__ = ["CONFIG_VARIABLE", "serve"]

CONFIG_VARIABLE = "POLICY_ROUTER_SERVE_CONFIG"
"""The environment variable each worker of `--workers N` reads its policy from (`worker`)."""


def serve(
    config: str | Path | Mapping[str, Any], *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
    on_ready: Any = None, workers: int | None = None,
) -> None:
    """Serve the policy file `config` (or a mapping of one) on `host:port` with uvicorn
    until SIGTERM or Ctrl-C, in `workers` processes (default: one per core when the file
    names a shared `store:`, else one).

    The file is read, and the port bound, before anything is served: a wrong file is a
    `ConfigError`, a port outside 1-65535 or one already in use an `OSError`-based
    `ConfigError`, each before `on_ready(url)` is called; so is more than one worker over
    a store only one process holds. After SIGTERM the server stops accepting, gives
    requests in flight `server.shutdown_grace` seconds, then cancels and settles the rest,
    and exits."""
    import signal

    app = create_app(config)
    try:
        import uvicorn
    except ImportError:
        raise ConfigError("policy-router serve needs the server extra: pip install 'policy-router[server]'") from None
    count = _workers(workers, config, app.state.tenants.store)
    sock = _bound(host, port)
    options = {
        "log_level": log_level, "timeout_graceful_shutdown": app.state.grace,
        # Longer than any client keeps an idle connection (httpx 5 s, aiohttp 15 s, Node
        # 5 s): a client never writes a request onto a connection this server is closing.
        "timeout_keep_alive": KEEP_ALIVE,
    }
    if count > 1:
        import asyncio

        from uvicorn.supervisors import Multiprocess

        asyncio.run(app.state.tenants.aclose())  # it checked the file; each worker builds its own
        os.environ[CONFIG_VARIABLE] = json.dumps(dict(config)) if isinstance(config, Mapping) else str(Path(config).resolve())
        _shared_metrics()
        if on_ready is not None:
            on_ready(f"http://{host}:{port}/v1")
        uvicorn_config = uvicorn.Config("policy_router.server.worker:app", factory=True, workers=count, **options)
        Multiprocess(uvicorn_config, sockets=[sock]).run()  # SIGTERM: each worker's grace, then exit
        return
    if on_ready is not None:
        on_ready(f"http://{host}:{port}/v1")
    # uvicorn handles SIGTERM itself (stop, grace, cancel, lifespan shutdown), then raises it
    # again to whatever handler was there before: a quiet one, so a shutdown that went as
    # planned exits 0 rather than as killed by the signal.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    tune_collector()
    try:
        uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)


def tune_collector() -> None:
    """Put every object built so far (LiteLLM's model tables and modules, the SDKs' types,
    the policy) out of the garbage collector's reach, once the app is built and before it
    serves, and let the youngest generation grow to `YOUNG_THRESHOLD` objects between
    collections rather than CPython's 700.

    Why: a full collection walks every tracked object, and the server holds ~400,000 of
    them before its first request, nearly all alive for as long as it runs. Measured with
    `gc.callbacks` over 2,000 whole answers: a full collection took ~0.2 s, one per ~1,000
    requests, so ~0.2 ms a request (about 5% of a request's CPU); frozen, 0.02 ms. What is
    frozen is never collected: an object made before serving that later becomes garbage in
    a reference cycle stays in memory (one freed by its reference count is freed as ever).
    The young generation: each request in flight holds a few thousand objects (LiteLLM's,
    the HTTP clients'), and a young collection walks all of them; at 700 one came every
    ~7 requests, ~80 µs a request; at 7,000, ~30 µs, each pass ~4 ms (measured in process,
    16 requests at a time). Called by `serve` and by each worker of `--workers`, never by
    `create_app` (an app served by another ASGI server leaves the process's collector to
    its owner)."""
    import gc

    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


YOUNG_THRESHOLD = 7000
"""Net new objects between two collections of the youngest generation in a served
process (CPython's default is 700; see `tune_collector`)."""


def _workers(asked: int | None, config: Any, store: Any) -> int:
    """How many worker processes: `asked`, else one per core over a shared store."""
    from ..state.memory import InMemoryStore

    shared = not isinstance(store, InMemoryStore)
    named = isinstance(config, str | Path) and load(config).policies.get("store") is not None
    if asked is None:
        return (os.cpu_count() or 1) if shared and named else 1
    if asked < 1:
        raise ConfigError(f"--workers must be 1 or more, got {asked}")
    if asked > 1 and not shared:
        raise ConfigError(
            f"--workers {asked} needs a store the workers share (store: sqlite:///path or redis://...): "
            "over one held in a process, each worker would keep its own budgets"
        )
    return asked


def _bound(host: str, port: int) -> Any:
    """A listening socket on `host:port`, or a `ConfigError` saying why not."""
    import socket

    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be 1 to 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _shared_metrics() -> None:
    """Point prometheus-client's multiprocess mode at a fresh directory of this server's,
    before any worker starts (a worker reads it when it first imports the client)."""
    import tempfile

    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="policy-router-metrics-")
