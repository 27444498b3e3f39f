"""The HTTP face of the server: OpenAI's paths over the tenants' routers, on Starlette.

`POST /v1/chat/completions`, `/v1/embeddings` and `/v1/responses` (streamed as server-sent
events when asked), `GET /v1/models` (the groups a key may call, with what they can do)
and `GET /health`. Every path but `/health` needs a key (`Authorization: Bearer <key>`). A
request is read within the body limit and checked, its key's groups and stored objects and
rate window asked, before the router sends anything; then the router decides, as it does
in-process. A client that disconnects before its answer has its call cancelled and
settled (`leaving`). Unknown paths and methods answer in OpenAI's error shape.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from loguru import logger

from ..config.policy_file import load
from ..ground.errors import ConfigError, StoreUnavailableError
from ..ground.ids import new_id
from ..policies.budget import Spending
from .admin import budget_of, spend_of
from .answers import amount as _amount
from .answers import error_body, events, headers_of, not_found, shaped
from .body import DEFAULT_MAX_BODY_MB, TooLarge, json_of, read_body
from .leaving import ClientGone, unless_gone
from .owners import named_ids, owned_ids
from .reading import read
from .tenants import Forbidden, Tenant, Tenants, Unauthorized

__all__ = ["create_app", "serve"]

_PATHS = {"chat": "/v1/chat/completions", "embedding": "/v1/embeddings", "responses": "/v1/responses"}

DEFAULT_GRACE = 10.0
"""Seconds requests in flight are given after SIGTERM before they are cancelled."""

KEEP_ALIVE = 75
"""Seconds an idle client connection is kept open (nginx's default)."""


def _starlette() -> Any:
    try:
        import starlette.applications
    except ImportError:
        raise ConfigError("policy-router serve needs the server extra: pip install 'policy-router[server]'") from None
    return starlette


def create_app(config: str | Path | Mapping[str, Any], *, env: Mapping[str, str] | None = None) -> Any:
    """The server's ASGI application (a Starlette app) for a policy file or mapping.

    The keys are read from its `server.keys` section and `POLICY_ROUTER_API_KEY` in `env`
    (default: the process's environment). Raises `ConfigError` before serving anything:
    a wrong file, a variable that is not set or empty, two tenants with one key, no key at
    all. Serve it with any ASGI server, or with `serve`."""
    _starlette()
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    loaded = load(config)
    if loaded.missing:
        raise ConfigError("; ".join(loaded.missing))
    tenants = Tenants(loaded, os.environ if env is None else env)
    settings = loaded.server
    limit = int((settings.max_body_mb if settings is not None else DEFAULT_MAX_BODY_MB) * 2**20)

    def failed(error: BaseException) -> Response:
        if isinstance(error, Unauthorized):
            body = {"error": {"message": str(error), "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
            return JSONResponse(body, status_code=401, headers={"x-should-retry": "false"})
        if isinstance(error, Forbidden | PermissionError):
            body = {"error": {"message": str(error), "type": "permission_error", "param": None, "code": "forbidden"}}
            return JSONResponse(body, status_code=403, headers={"x-should-retry": "false"})
        if isinstance(error, TooLarge):
            body = {"error": {"message": str(error), "type": "invalid_request_error", "param": None, "code": "request_too_large"}}
            return JSONResponse(body, status_code=413, headers={"x-should-retry": "false", "connection": "close"})
        status, body, headers = error_body(error)
        return JSONResponse(body, status_code=status, headers=headers)

    def missing(message: str, **named: str) -> Response:
        status, body, headers = not_found(message, **named)
        return JSONResponse(body, status_code=status, headers=headers)

    async def call(request: Request, endpoint: str) -> Response:
        try:
            tenant = tenants.find(request.headers.get("authorization"))
            body = json_of(await read_body(request, limit))
            kwargs = read(endpoint, body, request.headers, tenant.key, tenants.deadline)
        except (Unauthorized, Forbidden, ConfigError, TooLarge) as error:
            return failed(error)
        group = kwargs["model"]
        if tenant.key.groups is not None and group not in tenant.key.groups:
            return missing(
                f"The model '{group}' does not exist or you do not have access to it.",
                code="model_not_found", param="model",
            )
        try:
            for argument, named in named_ids(kwargs):
                if await tenants.owners.owner(named) != tenant.key.name:
                    message, said = _unknown(argument, named)
                    return missing(message, **said)
        except StoreUnavailableError as error:
            return failed(error)
        slot = new_id()
        try:
            wait = await tenants.admit(tenant, slot)
            if wait is not None:
                return failed(_over_rpm(tenant, wait))
            routed = await unless_gone(
                request.receive, tenant.router.aroute(endpoint=endpoint, scope=tenant.scope, **kwargs)
            )
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the connection is gone
        except Exception as error:
            return failed(error)
        finally:
            with contextlib.suppress(Exception):  # the slot stays counted; a lost write is the store's
                await tenants.done(tenant, slot)
        if kwargs.get("stream"):
            return StreamingResponse(
                events(routed, endpoint, _recorder(tenant) if endpoint == "responses" else None),
                media_type="text/event-stream",
                headers=headers_of(routed, streamed=True),
            )
        if endpoint == "responses":
            await _record(tenant, owned_ids(routed.response))
        return JSONResponse(shaped(routed), headers=headers_of(routed))

    async def _record(tenant: Tenant, ids: list[str]) -> None:
        # The answer is made and paid for: a store that cannot record it costs the tenant
        # its continuation (refused later as unknown), never the answer itself.
        try:
            await tenants.owners.remember(ids, tenant.key.name)
        except StoreUnavailableError as error:
            logger.warning("policy_router: could not record which key owns {}: {}", ids, error)

    def _recorder(tenant: Tenant) -> Any:
        async def record(item: Any) -> None:
            if getattr(item, "type", None) == "response.created":
                await _record(tenant, owned_ids(item))
        return record

    async def chat(request: Request) -> Response:
        return await call(request, "chat")

    async def embeddings(request: Request) -> Response:
        return await call(request, "embedding")

    async def responses(request: Request) -> Response:
        return await call(request, "responses")

    async def models(request: Request) -> Response:
        try:
            tenant = tenants.find(request.headers.get("authorization"))
        except (Unauthorized, Forbidden) as error:
            return failed(error)
        router = tenant.router
        allowed = tenant.key.groups
        data = [
            {
                "id": group,
                "object": "model",
                "created": 0,
                "owned_by": "policy-router",
                "capabilities": sorted({c for r in routes for c in router.capabilities(r.name)}),
                "routes": len(routes),
            }
            for group, routes in router.groups.items()
            if allowed is None or group in allowed
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        """Alive to anyone; with a key, that key's spend and the routes' health too."""
        found: dict[str, Any] = {"status": "ok"}
        if request.headers.get("authorization"):
            try:
                tenant = tenants.find(request.headers.get("authorization"))
            except (Unauthorized, Forbidden) as error:
                return failed(error)
            try:
                found["key"] = {"name": tenant.key.name, **_spend(tenant)}
                found["routes"] = {
                    name: {"state": h.state, "rest_left": round(h.rest_left, 3)}
                    for name, h in tenant.router.health().items()
                }
            except Exception as error:
                return failed(error)
        return JSONResponse(found)

    def either(request: Request) -> Tenant:
        """The key of an admin path: an admin key, or a tenant's (for its own scopes)."""
        try:
            return tenants.find(request.headers.get("authorization"), admin=True)
        except Forbidden:
            return tenants.find(request.headers.get("authorization"))

    async def spend(request: Request) -> Response:
        try:
            found = spend_of(either(request), request.query_params.get("scope"))
        except Exception as error:
            return failed(error)
        return JSONResponse({"object": "list", "data": found})

    async def set_budget(request: Request) -> Response:
        scope = request.path_params["scope"]
        try:
            admin = tenants.find(request.headers.get("authorization"), admin=True)
            if request.method == "DELETE":
                admin.router.set_budget(scope, None)
            else:
                body = json_of(await read_body(request, limit))
                admin.router.set_budget(scope, budget_of(scope, body, tenants.currency))
            found = spend_of(admin, scope)
        except Exception as error:
            return failed(error)
        return JSONResponse({"object": "list", "data": found})

    async def unknown_path(request: Request, error: Exception) -> Response:
        status = getattr(error, "status_code", 404)
        how = "Invalid URL" if status == 404 else "Method not allowed for URL"
        body = {"error": {"message": f"{how} ({request.method} {request.url.path})", "type": "invalid_request_error", "param": None, "code": None}}
        return JSONResponse(body, status_code=status, headers={"x-should-retry": "false"})

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        await tenants.aclose()

    app = Starlette(
        routes=[
            Route(_PATHS["chat"], chat, methods=["POST"]),
            Route(_PATHS["embedding"], embeddings, methods=["POST"]),
            Route(_PATHS["responses"], responses, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/spend", spend, methods=["GET"]),
            Route("/v1/budgets/{scope:path}", set_budget, methods=["PUT", "DELETE"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: unknown_path},
        lifespan=lifespan,
    )
    app.state.tenants = tenants
    app.state.grace = settings.shutdown_grace if settings is not None else DEFAULT_GRACE
    return app


def _unknown(argument: str, named: str) -> tuple[str, dict[str, str]]:
    """OpenAI's words for a stored object the key does not own (or nobody does)."""
    if argument == "conversation":
        return f"Conversation with id '{named}' not found.", {"code": "conversation_not_found", "param": argument}
    return f"Previous response with id '{named}' not found.", {"code": "previous_response_not_found", "param": argument}


def _over_rpm(tenant: Tenant, wait: float) -> Exception:
    from ..ground.errors import RateLimitedError

    return RateLimitedError(
        f"API key {tenant.key.name!r} reached its {tenant.key.rpm} requests a minute; "
        f"nothing was sent (a slot frees in {wait:.1f} s)",
        retry_after=wait,
    )


def _spend(tenant: Tenant) -> dict[str, Any]:
    """The key's budget account: its own, or the server's it spends from; none without."""
    try:
        spent: Spending = tenant.router.spending(key=tenant.key.name) if tenant.key.budget else tenant.router.spending()
    except ConfigError:
        return {"budget": None}
    return {
        "budget": tenant.key.budget.scope if tenant.key.budget else "shared",
        "cap": _amount(spent.cap),
        "spent": _amount(spent.spent),
        "reserved": _amount(spent.reserved),
        "left": _amount(spent.left),
        "currency": spent.currency,
        "calls": spent.calls,
        "in_flight": spent.in_flight,
        "exact": spent.is_exact,
    }


def serve(
    config: str | Path, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
    on_ready: Any = None,
) -> None:
    """Serve the policy file `config` on `host:port` with uvicorn until SIGTERM or Ctrl-C.

    The file is read, and the port bound, before anything is served: a wrong file is a
    `ConfigError`, a port outside 1-65535 or one already in use an `OSError`-based
    `ConfigError`, each before `on_ready(url)` is called. After SIGTERM the server stops
    accepting, gives requests in flight `server.shutdown_grace` seconds, then cancels and
    settles the rest, and exits."""
    import signal
    import socket

    app = create_app(config)
    try:
        import uvicorn
    except ImportError:
        raise ConfigError("policy-router serve needs the server extra: pip install 'policy-router[server]'") from None
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
    config_ = uvicorn.Config(
        app, log_level=log_level, timeout_graceful_shutdown=app.state.grace,
        # Longer than any client keeps an idle connection (httpx 5 s, aiohttp 15 s, Node
        # 5 s): a client never writes a request onto a connection this server is closing.
        timeout_keep_alive=KEEP_ALIVE,
    )
    if on_ready is not None:
        on_ready(f"http://{host}:{port}/v1")
    # uvicorn handles SIGTERM itself (stop, grace, cancel, lifespan shutdown), then raises it
    # again to whatever handler was there before: a quiet one, so a shutdown that went as
    # planned exits 0 rather than as killed by the signal.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        uvicorn.Server(config_).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
