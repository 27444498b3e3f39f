"""What `router.explain(...)` says: every route's verdict for a call, as its plan would
order and admit it, with nothing sent and nothing reserved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.checks import explain, sift
from ..core.journey import Explanation
from ..endpoints import Endpoint, with_messages
from ..policies.bounds import RequestFacts
from ..policies.candidate import Candidate
from ..policies.order import BY_WINDOWS, Order, OrderContext
from ..policies.requirements import Requirements
from . import window
from .planning import Planner
from .prompt import Prompt

__all__ = ["explanation"]


def explanation(
    planner: Planner, endpoint: Endpoint, model: str | None, messages: Any, kwargs: Mapping[str, Any]
) -> Explanation:
    """The verdict for every route of the group `model` names, for the call."""
    kwargs = with_messages(endpoint, messages, kwargs)
    group, candidates = planner.group(model)
    needs = planner.needs(endpoint, kwargs)
    prompt = Prompt(endpoint, kwargs)  # measured once, as the live call measures it
    facts = planner.facts(endpoint, group, kwargs, explaining=True, prompt=prompt)
    ordering, by_health = planner._ordering(group, facts, endpoint, needs)
    if by_health is not None:
        seen = planner.store.all_health()
        ordering = lambda cs: by_health(cs, seen)  # noqa: E731
    windows = None
    if group in planner._books:
        windows = planner.store.windows([c.id for c in candidates])
        order = planner.order_of(group)
        by_windows = BY_WINDOWS.get(order) if isinstance(order, Order) else None
        if by_windows is not None:
            ordering = lambda cs: by_windows(cs, windows)  # noqa: E731
    # The live call's window check, so that explain lists the skip the call would make.
    sifted = window.fitted(endpoint, kwargs, sift(candidates, needs), prompt)
    return explain(
        group, candidates, needs, ordering, planner.budgets.for_call(kwargs, kwargs.get("scope")) if planner.budgets else None, facts, windows,
        _notes(planner, group, candidates, facts, endpoint, needs), sifted=sifted,
    )


def _notes(
    planner: Planner, group: str, candidates: Sequence[Candidate], facts: RequestFacts | None,
    endpoint: Endpoint, needs: Requirements,
) -> dict[str, str] | None:
    """What the group's ordering says of each route, for an explanation (a score)."""
    scores = getattr(planner.order_of(group), "scores", None)
    if not callable(scores):
        return None
    context = OrderContext(
        group=group, facts=facts, now=planner.now(), endpoint=endpoint.name, streaming=needs.streaming
    )
    try:
        return {s.id: str(s) for s in scores(list(candidates), context)}
    except Exception as error:
        return {c.id: f"history unavailable ({error}): listed order" for c in candidates}
