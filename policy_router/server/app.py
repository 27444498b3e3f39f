"""The HTTP face of the server: OpenAI's paths over the tenants' routers, on Starlette.

`POST /v1/chat/completions`, `/v1/embeddings` and `/v1/responses` (streamed as server-sent
events when asked), `GET /v1/models` (the groups, with what they can do) and `GET /health`.
Every path but `/health` needs a key (`Authorization: Bearer <key>`). A request is read and
checked, and its key's rate window asked, before the router sends anything; then the
router decides, as it does in-process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from ..config.policy_file import load
from ..ground.errors import ConfigError
from ..ground.ids import new_id
from ..policies.budget import Spending
from .answers import amount as _amount
from .answers import error_body, events, headers_of, shaped
from .reading import read
from .tenants import Tenant, Tenants, Unauthorized

__all__ = ["create_app", "serve"]

_PATHS = {"chat": "/v1/chat/completions", "embedding": "/v1/embeddings", "responses": "/v1/responses"}


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
    a wrong file, a variable that is not set, no key at all. Serve it with any ASGI
    server, or with `serve`."""
    _starlette()
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    loaded = load(config)
    if loaded.missing:
        raise ConfigError("; ".join(loaded.missing))
    tenants = Tenants(loaded, os.environ if env is None else env)

    def failed(error: BaseException) -> Response:
        if isinstance(error, Unauthorized):
            body = {"error": {"message": str(error), "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
            return JSONResponse(body, status_code=401)
        status, body, headers = error_body(error)
        return JSONResponse(body, status_code=status, headers=headers)

    async def call(request: Request, endpoint: str) -> Response:
        try:
            tenant = tenants.find(request.headers.get("authorization"))
            try:
                body = await request.json()
            except ValueError:
                raise ConfigError("the request body is not JSON") from None
            kwargs = read(endpoint, body, request.headers, tenant.key, tenants.deadline)
        except (Unauthorized, ConfigError) as error:
            return failed(error)
        slot = new_id()
        try:
            wait = await tenants.admit(tenant, slot)
            if wait is not None:
                return failed(_over_rpm(tenant, wait))
            routed = await tenant.router.aroute(endpoint=endpoint, **kwargs)
        except Exception as error:
            return failed(error)
        finally:
            with contextlib.suppress(Exception):  # the slot stays counted; a lost write is the store's
                await tenants.done(tenant, slot)
        if kwargs.get("stream"):
            return StreamingResponse(
                events(routed, endpoint), media_type="text/event-stream",
                headers=headers_of(routed, streamed=True),
            )
        return JSONResponse(shaped(routed), headers=headers_of(routed))

    async def chat(request: Request) -> Response:
        return await call(request, "chat")

    async def embeddings(request: Request) -> Response:
        return await call(request, "embedding")

    async def responses(request: Request) -> Response:
        return await call(request, "responses")

    async def models(request: Request) -> Response:
        try:
            tenant = tenants.find(request.headers.get("authorization"))
        except Unauthorized as error:
            return failed(error)
        router = tenant.router
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
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> Response:
        """Alive to anyone; with a key, that key's spend and the routes' health too."""
        found: dict[str, Any] = {"status": "ok"}
        if request.headers.get("authorization"):
            try:
                tenant = tenants.find(request.headers.get("authorization"))
            except Unauthorized as error:
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
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.tenants = tenants
    return app


def _over_rpm(tenant: Tenant, wait: float) -> Exception:
    from ..ground.errors import RateLimitedError

    return RateLimitedError(
        f"API key {tenant.key.name!r} reached its {tenant.key.rpm} requests a minute; "
        f"nothing was sent (a slot frees in {wait:.1f} s)",
        retry_after=wait,
    )


def _spend(tenant: Tenant) -> dict[str, Any]:
    """The key's budget account: its own, or the shared one it spends from; none without."""
    try:
        spent: Spending = tenant.router.spending()
    except ConfigError:
        return {"budget": None}
    return {
        "budget": tenant.key.budget.name if tenant.key.budget else "shared",
        "cap": _amount(spent.cap),
        "spent": _amount(spent.spent),
        "reserved": _amount(spent.reserved),
        "left": _amount(spent.left),
        "currency": spent.currency,
        "calls": spent.calls,
        "in_flight": spent.in_flight,
        "exact": spent.is_exact,
    }


def serve(config: str | Path, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Serve the policy file `config` on `host:port` with uvicorn until interrupted."""
    app = create_app(config)
    try:
        import uvicorn
    except ImportError:
        raise ConfigError("policy-router serve needs the server extra: pip install 'policy-router[server]'") from None
    uvicorn.run(app, host=host, port=port, log_level=log_level)
