"""One planned call, to its answer: driven to a response (`drive.loops`) or opened as a stream
(`drive.stream`), with LiteLLM's function of the endpoint. Sync and async alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.gate import Send
from ..core.journey import Routed
from ..core.plan import Plan
from ..endpoints import Endpoint
from . import transport
from .loops import adrive, drive
from .stream import StreamRestart, astream, stream

__all__ = ["acall", "call", "finish"]

OnRestart = Callable[[StreamRestart], None] | None


def call(
    plan: Plan, spec: Endpoint, kwargs: dict[str, Any], restart: bool, on_restart: OnRestart
) -> Routed[Any]:
    """Run the planned call: a response, or a `RoutedStream` when `stream=True`."""
    if kwargs.get("stream"):
        return stream(plan, spec, kwargs, restart=restart, on_restart=on_restart)

    def open_(send: Send) -> Any:
        return transport.send(spec.function, kwargs, plan, send)

    response, send = drive(plan, open_, usage=spec.usage)
    return finish(response, send, plan)


async def acall(
    plan: Plan, spec: Endpoint, kwargs: dict[str, Any], restart: bool, on_restart: OnRestart
) -> Routed[Any]:
    """The async twin of `call`."""
    if kwargs.get("stream"):
        return await astream(plan, spec, kwargs, restart=restart, on_restart=on_restart)

    async def open_(send: Send) -> Any:
        return await transport.asend(spec.afunction, kwargs, plan, send)

    response, send = await adrive(plan, open_, usage=spec.usage)
    return finish(response, send, plan)


def finish(response: Any, send: Send, plan: Plan) -> Routed[Any]:
    """The answer with the journey in its `_hidden_params`, where LiteLLM keeps its own."""
    journey = plan.journey
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict):
        hidden["policy_router"] = journey
    elif hidden is not None:  # a text completion's HiddenParams model (extra fields allowed)
        hidden.policy_router = journey
    return Routed(response, send.route, journey)
