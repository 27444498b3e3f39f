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

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from loguru import logger

from ..config.policy_file import load
from ..core.journey import Journey
from ..drive.seam.preload import preload
from ..ground.errors import ConfigError, StoreUnavailableError
from ..ground.ids import new_id
from .admin import budget_of, key_account, spend_of
from .answers import as_base64, error_body, events, headers_of, not_found, shaped
from .anthropic import error_of, input_tokens, key_of, read_messages
from .anthropic import events as message_events
from .anthropic import shaped as message_shaped
from .body import DEFAULT_MAX_BODY_MB, TooLarge, json_of, read_body
from .leaving import ClientGone, unless_gone
from .metrics import Meter, Seen
from .owners import named_ids, owned_ids, unknown_words
from .reading import policy_headers, read
from .request_ids import RequestIds
from .tenants import Forbidden, Tenant, Tenants, Unauthorized, over_rpm

__all__ = ["DEFAULT_GRACE", "KEEP_ALIVE", "create_app"]

_PATHS = {
    "chat": "/v1/chat/completions", "embedding": "/v1/embeddings", "responses": "/v1/responses",
    "completion": "/v1/completions",
}

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
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    loaded = load(config)
    if loaded.missing:
        raise ConfigError("; ".join(loaded.missing))
    tenants = Tenants(loaded, os.environ if env is None else env)
    settings = loaded.server
    limit = int((settings.max_body_mb if settings is not None else DEFAULT_MAX_BODY_MB) * 2**20)
    meter = Meter(tenants.router.groups)
    # The bodies' definitions take time to build: OpenAI's (0.1 s) before serving; the
    # Messages API's (~4 s: the anthropic SDK imports every type it has) on a worker thread
    # when the first Messages request comes, so no other request waits for it.
    _define_bodies()
    # Streams are the server's traffic: its first would load tiktoken's encoding on the
    # event loop, every other request waiting (the router loaded the failure path).
    preload(encoding=True)
    defined: set[str] = set()

    async def define(endpoint: str) -> None:
        if endpoint not in defined:
            from ..drive.seam.openai_params import params

            await asyncio.to_thread(params, endpoint)
            defined.add(endpoint)

    def failed(error: BaseException, *, anthropic: bool = False) -> Response:
        """`error` as OpenAI's error body, or as Anthropic's on the Messages paths."""
        if isinstance(error, Unauthorized):
            body = {"error": {"message": str(error), "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
            status, headers = 401, {"x-should-retry": "false"}
        elif isinstance(error, Forbidden | PermissionError):
            body = {"error": {"message": str(error), "type": "permission_error", "param": None, "code": "forbidden"}}
            status, headers = 403, {"x-should-retry": "false"}
        elif isinstance(error, TooLarge):
            body = {"error": {"message": str(error), "type": "invalid_request_error", "param": None, "code": "request_too_large"}}
            status, headers = 413, {"x-should-retry": "false", "connection": "close"}
        else:
            status, body, headers = error_body(error)
        return answer(status, body, headers, anthropic)

    def answer(status: int, body: dict[str, Any], headers: dict[str, str], anthropic: bool) -> Response:
        if anthropic:
            body = error_of(status, body["error"]["message"], body["error"].get("policy_router"))
        return JSONResponse(body, status_code=status, headers=headers)

    def missing(message: str, anthropic: bool = False, *, code: str | None = None, param: str | None = None) -> Response:
        return answer(*not_found(message, code=code, param=param), anthropic)

    def no_model(group: str, anthropic: bool) -> Response:
        return missing(
            f"The model '{group}' does not exist or you do not have access to it.", anthropic,
            code="model_not_found", param="model",
        )

    async def call(request: Request, endpoint: str) -> Response:
        started, seen = time.perf_counter(), Seen()
        response = await answered(request, endpoint, seen)
        if not isinstance(response, StreamingResponse):
            meter.done(seen, response.status_code, time.perf_counter() - started, bytes(response.body))
            return response

        async def metered(chunks: AsyncIterable[Any]) -> AsyncIterator[Any]:
            try:
                async for chunk in chunks:
                    yield chunk
            finally:
                seen.journey = getattr(seen.stream, "journey", seen.journey)
                meter.done(seen, response.status_code, time.perf_counter() - started)

        response.body_iterator = metered(response.body_iterator)
        return response

    async def answered(request: Request, endpoint: str, seen: Seen) -> Response:
        anthropic = endpoint == "messages"
        named: dict[str, str] = {}
        try:
            tenant = tenants.find(key_of(request.headers) if anthropic else request.headers.get("authorization"))
            seen.key = tenant.key.name
            body = json_of(await read_body(request, limit))
            if anthropic:
                await define(endpoint)
                kwargs, named = read_messages(endpoint, body, request.headers, tenant.key, tenants.deadline)
            else:
                kwargs = read(endpoint, body, policy_headers(request.scope["headers"]), tenant.key, tenants.deadline)
        except (Unauthorized, Forbidden, ConfigError, TooLarge) as error:
            return failed(error, anthropic=anthropic)
        group = kwargs["model"]
        seen.group = meter.group_of(group)
        if tenant.key.groups is not None and group not in tenant.key.groups:
            return no_model(group, anthropic)
        try:
            for argument, id_ in named_ids(kwargs):
                if await tenants.owners.owner(id_) != tenant.key.name:
                    message, code = unknown_words(argument, id_)
                    return missing(message, code=code, param=argument)
        except StoreUnavailableError as error:
            return failed(error)
        # Asked as base64, the vectors are encoded here: every provider can send floats.
        base64_asked = endpoint == "embedding" and kwargs.get("encoding_format") == "base64"
        if base64_asked:
            del kwargs["encoding_format"]
        slot = new_id()
        try:
            wait = await tenants.admit(tenant, slot)
            if wait is not None:
                return failed(over_rpm(tenant, wait), anthropic=anthropic)
            scope = {**tenant.scope, **named}
            routed = await unless_gone(
                request.receive, tenant.router.aroute(endpoint=endpoint, scope=scope, **kwargs)
            )
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the connection is gone
        except Exception as error:
            seen.journey = Journey.of(error)
            return failed(error, anthropic=anthropic)
        finally:
            with contextlib.suppress(Exception):  # the slot stays counted; a lost write is the store's
                await tenants.done(tenant, slot)
        seen.journey, seen.stream = routed.journey, routed.response
        if anthropic:
            if kwargs.get("stream"):
                return StreamingResponse(message_events(routed), media_type="text/event-stream", headers=headers_of(routed, streamed=True))
            return JSONResponse(message_shaped(routed), headers=headers_of(routed))
        if kwargs.get("stream"):
            return StreamingResponse(
                events(routed, endpoint, _recorder(tenant) if endpoint == "responses" else None),
                media_type="text/event-stream",
                headers=headers_of(routed, streamed=True),
            )
        if endpoint == "responses":
            await _record(tenant, owned_ids(routed.response))
        found = as_base64(routed) if base64_asked else shaped(routed)
        return Response(found, media_type="application/json", headers=headers_of(routed))

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

    async def completions(request: Request) -> Response:
        return await call(request, "completion")

    async def messages(request: Request) -> Response:
        return await call(request, "messages")

    async def count_tokens(request: Request) -> Response:
        try:
            tenant = tenants.find(key_of(request.headers))
            body = json_of(await read_body(request, limit))
            await define("count_tokens")
            kwargs, _ = read_messages("count_tokens", body, request.headers, tenant.key, tenants.deadline)
        except (Unauthorized, Forbidden, ConfigError, TooLarge) as error:
            return failed(error, anthropic=True)
        group = kwargs["model"]
        routes = tenant.router.groups.get(group)
        if not routes or (tenant.key.groups is not None and group not in tenant.key.groups):
            return no_model(group, True)
        return JSONResponse({"input_tokens": input_tokens(kwargs, routes[0])})

    def described(tenant: Tenant, group: str) -> dict[str, Any]:
        routes = tenant.router.groups[group]
        return {
            "id": group,
            "object": "model",
            "created": 0,
            "owned_by": "policy-router",
            "capabilities": sorted({c for r in routes for c in tenant.router.capabilities(r.name)}),
            "routes": len(routes),
        }

    def may_call(tenant: Tenant, group: str) -> bool:
        allowed = tenant.key.groups
        return group in tenant.router.groups and (allowed is None or group in allowed)

    async def models(request: Request) -> Response:
        try:
            tenant = tenants.find(request.headers.get("authorization"))
        except (Unauthorized, Forbidden) as error:
            return failed(error)
        data = [described(tenant, g) for g in tenant.router.groups if may_call(tenant, g)]
        return JSONResponse({"object": "list", "data": data})

    async def model(request: Request) -> Response:
        group = request.path_params["model"]
        try:
            tenant = tenants.find(request.headers.get("authorization"))
        except (Unauthorized, Forbidden) as error:
            return failed(error)
        if not may_call(tenant, group):
            return no_model(group, False)
        return JSONResponse(described(tenant, group))

    async def health(request: Request) -> Response:
        """Alive to anyone; with a key, that key's spend and the routes' health too."""
        found: dict[str, Any] = {"status": "ok"}
        if request.headers.get("authorization"):
            try:
                tenant = tenants.find(request.headers.get("authorization"))
            except (Unauthorized, Forbidden) as error:
                return failed(error)
            try:
                found["key"] = {"name": tenant.key.name, **key_account(tenant)}
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

    async def metrics(request: Request) -> Response:
        try:
            tenants.find(request.headers.get("authorization"), admin=True)
        except (Unauthorized, Forbidden) as error:
            return failed(error)
        text, kind = meter.exposition()
        return Response(text, media_type=kind)

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
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(_PATHS["completion"], completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{model:path}", model, methods=["GET"]),
            Route("/v1/spend", spend, methods=["GET"]),
            Route("/v1/budgets/{scope:path}", set_budget, methods=["PUT", "DELETE"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        middleware=[Middleware(RequestIds)],
        exception_handlers={HTTPException: unknown_path},
        lifespan=lifespan,
    )
    app.state.tenants = tenants
    app.state.grace = settings.shutdown_grace if settings is not None else DEFAULT_GRACE
    return app


def _define_bodies() -> None:
    from ..drive.seam.openai_params import params

    for endpoint in ("chat", "responses", "embedding", "completion"):
        params(endpoint)
