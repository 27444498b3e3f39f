"""The records every part writes: which check a route met, and a skip with its reason.

A skip is a frozen record (route, check, reason, detail), never an index in a set and a
flag (STYLE habit 5); the journey of a request (`core.journey`) is made of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ['Check', 'Skip']


class Check(StrEnum):
    """The checks a route passes before it is sent a request, in the order they run."""

    ENABLED = "enabled"
    """The route is switched on (`Route(enabled=False)` switches one off without removing it)."""
    KNOWN = "known"
    REQUIREMENTS = "requirements"
    CONTEXT_WINDOW = "context_window"
    """The prompt and the reply cap fit the route's context window."""
    FLOOR = "floor"
    CONTINUITY = "continuity"
    """A call with `previous_response_id` goes to the route that made that response."""
    BREAKER = "breaker"
    RATE_LIMIT = "rate_limit"
    BUDGET = "budget"
    DEADLINE = "deadline"
    HEDGE = "hedge"
    """A hedge was not sent: the group's hedges reached their share of its requests."""
    SEND = "send"
    """The request could not leave this process for this route (not a provider fault)."""



@dataclass(frozen=True, slots=True)
class Skip:
    """A route that was not sent the request: which check stopped it, and why.

    `group` and `journey_id` tie the skip to its request once the router records it, and
    `route_id` names the route's identity (`route` is its display name); they are context,
    left out of equality."""

    route: str
    """The route's display name."""
    check: Check
    """The check that stopped it (`Check.BUDGET`, `Check.BREAKER`, ...)."""
    reason: str
    """Why, as a sentence naming what to change."""
    _: KW_ONLY  # what follows is named at every construction
    detail: Mapping[str, Any] = field(default_factory=dict)
    """The check's numbers behind the sentence (a budget's `worst_case` and `left`, ...)."""
    group: str = field(default="", compare=False)
    """The request's group, once recorded."""
    journey_id: str = field(default="", compare=False)
    """The request's id, once recorded."""
    route_id: str = field(default="", compare=False)
    """The route's identity (its name may change on reconfigure; this does not)."""

    def of_request(self, group: str, journey_id: str, route_id: str) -> Skip:
        """This skip as one request's: a copy with its context (a static skip is made once
        per group and needs and copied for every request, so this is on the hot path:
        `dataclasses.replace` cost ~9 µs a skip, a third of planning a 1,000-route group)."""
        return Skip(
            self.route, self.check, self.reason, detail=self.detail, group=group, journey_id=journey_id, route_id=route_id
        )

    def __str__(self) -> str:
        if self.check is Check.SEND:
            return f"not sent to {self.route} ({self.reason})"
        return f"skipped {self.route} ({self.reason})"
