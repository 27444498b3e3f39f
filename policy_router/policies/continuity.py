"""Responses continuity: a call with `previous_response_id` goes to the route that made it.

A Responses API conversation lives with the provider that stored it: only the deployment
that produced response `resp_…` can continue from it, and moving the next turn elsewhere
would at best fail and at worst carry an on-device conversation to a vendor. So the router
remembers, in its store (shared across processes with Redis), which route id made each
response it returned, and whether that route was on the device; a call continuing from one
is pinned to that route, and every other route is skipped saying why.

- Made by a route of this group: only that route is tried; when it cannot serve (resting,
  its window full, the budget), the journey says so and nothing else is sent.
- Made by a route that is not among those able to serve this call (removed, in another
  group, or skipped by a check): nothing is sent; each route is skipped naming the one that
  made it.
- Not made by this router (the store has no record: another client made it, or the record
  expired): routed as any call; the on-device floor still holds if the call asks for it.
- The store cannot be asked: fail closed, on the device: only on-device routes are tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..ground.errors import StoreUnavailableError
from ..ground.reach import Reach
from ..ground.records import Check, Skip
from ..ground.route import Route
from ..state.store import Steps, StoreCall
from .candidate import Candidate

__all__ = ["KEEP_SECONDS", "Made", "pinned", "recall", "remember"]

KEEP_SECONDS = 30 * 24 * 3600.0
"""How long the store remembers which route made a response: OpenAI keeps a stored
response 30 days."""


@dataclass(frozen=True, slots=True)
class Made:
    """Which route made a response: its id, and whether it was on the device."""

    route: str
    on_device: bool


_UNREACHABLE = Made("", True)


def remember(response_id: object, route: Route) -> Steps[None]:
    """Record that `route` made the response `response_id` (a no-op without an id)."""
    if isinstance(response_id, str) and response_id:
        yield StoreCall(
            "remember_response",
            (response_id, route.id, route.reach is Reach.ON_DEVICE, KEEP_SECONDS),
            write=True,
        )


def recall(response_id: str) -> Steps[Made | None]:
    """Which route made `response_id`: None when the store has no record of it; a
    `Made` whose route is "" (on the device) when the store cannot be asked."""
    try:
        found = yield StoreCall("recall_response", (response_id,))
    except StoreUnavailableError:
        return _UNREACHABLE
    if found is None:
        return None
    route, on_device = found
    return Made(str(route), bool(on_device))


def _shown(response_id: str) -> str:
    # LiteLLM hands out its own ids (the provider's, base64-wrapped with routing hints):
    # long enough to drown a sentence.
    return response_id if len(response_id) <= 40 else f"{response_id[:16]}…{response_id[-12:]}"


def pinned(
    candidates: Sequence[Candidate], response_id: str, made: Made | None
) -> tuple[list[Candidate], list[Skip]]:
    """The candidates a call continuing from `response_id` may try, and the others' skips."""
    if made is None:
        return list(candidates), []
    response_id = _shown(response_id)
    if made is _UNREACHABLE or not made.route:
        kept = [c for c in candidates if c.route.reach is Reach.ON_DEVICE]
        why = (
            f"continues {response_id}, and the store that knows which route made it cannot "
            "be reached: only on-device routes are tried, so an on-device conversation "
            "cannot leave the device"
        )
        return kept, [Skip(c.name, Check.CONTINUITY, why) for c in candidates if c not in kept]
    kept = [c for c in candidates if c.id == made.route]
    where = "on the device" if made.on_device else "at a vendor"
    if kept:
        why = f"continues {response_id}, made by {kept[0].name} ({where}): only it holds it"
    else:
        why = (
            f"continues {response_id}, made by route id {made.route!r} ({where}), which "
            "cannot serve this call here: no other route holds that conversation"
        )
    return kept, [Skip(c.name, Check.CONTINUITY, why, detail={"made_by": made.route}) for c in candidates if c not in kept]
