"""One planned call, to its answer: driven to a response (`drive.loops`) or opened as a stream
(`drive.stream`), with LiteLLM's function of the endpoint. Sync and async alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.gate import Send
from ..core.journey import Journey, Routed, routed_of
from ..core.plan import Plan
from ..endpoints import Endpoint, reading
from ..ground.route import Route
from .loops import adrive, drive
from .seam import raised, transport
from .stream import StreamRestart, astream, stream
from .stream_watch import IncompleteResponseWarning, warn_caller

__all__ = ["Sent", "acall", "answer_of", "call", "finish", "served", "stamped"]

OnRestart = Callable[[StreamRestart], None] | None


class Sent:
    """An attempt the express lane already sent, with how it ended: handed to a plan that
    adopted it (`Plan.adopt`), so the driver tells the plan its outcome as for its own."""

    __slots__ = ("error", "result", "send")

    def __init__(self, send: Send, result: Any = None, error: BaseException | None = None) -> None:
        self.send, self.result, self.error = send, result, error

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def call(
    plan: Plan,
    spec: Endpoint,
    kwargs: dict[str, Any],
    restart: bool,
    on_restart: OnRestart,
    sent: Sent | None = None,
) -> Routed[Any]:
    """Run the planned call: a response, or a `RoutedStream` when `stream=True`. `sent` is
    an attempt the plan adopted: its outcome is told, not sent again."""
    if kwargs.get("stream"):
        return stream(plan, spec, kwargs, restart=restart, on_restart=on_restart)

    def open_(send: Send) -> Any:
        if sent is not None and send is sent.send:
            return sent.outcome()
        return answer_of(spec, send, transport.send(spec.function, kwargs, plan, send))

    response, send = drive(plan, open_, usage=spec.usage)
    return finish(response, send, plan, spec)


async def acall(
    plan: Plan,
    spec: Endpoint,
    kwargs: dict[str, Any],
    restart: bool,
    on_restart: OnRestart,
    sent: Sent | None = None,
) -> Routed[Any]:
    """The async twin of `call`."""
    if kwargs.get("stream"):
        return await astream(plan, spec, kwargs, restart=restart, on_restart=on_restart)

    async def open_(send: Send) -> Any:
        if sent is not None and send is sent.send:
            return sent.outcome()
        return answer_of(spec, send, await transport.asend(spec.afunction, kwargs, plan, send))

    response, send = await adrive(plan, open_, usage=spec.usage)
    return finish(response, send, plan, spec)


def answer_of(spec: Endpoint, send: Send, response: Any) -> Any:
    """`response`, or the provider's fault when it is an answer that says nothing (a 200
    with `choices: []`): raised as `raised.EmptyAnswerError`, so the next route is asked."""
    if spec.empty is not None and spec.empty(response):
        raise raised.empty_answer(send.route)
    return response


def finish(response: Any, send: Send, plan: Plan, spec: Endpoint) -> Routed[Any]:
    """The answer with the journey in its `_hidden_params`, where LiteLLM keeps its own."""
    served(spec, response, send.route)
    return stamped(response, send.route, plan.journey)


def served(spec: Endpoint, response: Any, route: Route) -> None:
    """Warn the caller, once, of an answer served incomplete (`Endpoint.incomplete`)."""
    if spec.incomplete is not None:
        why = spec.incomplete(response)
        if why:
            warn_caller(IncompleteResponseWarning(f"policy_router: {route.name}: {why}"))


def stamped(
    response: Any, route: Route, journey: Journey, hidden: Any = None
) -> Routed[Any]:
    """`response` with `journey` in its `_hidden_params` (`hidden`, when already read),
    paired with the route and journey."""
    if hidden is None:
        hidden = reading.hidden_of(response)
    if isinstance(hidden, dict):
        hidden["policy_router"] = journey
    elif hidden is not None:  # a text completion's HiddenParams model (extra fields allowed)
        hidden.policy_router = journey
    return routed_of(response, route, journey)
