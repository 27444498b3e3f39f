"""The plain chat call, read in one pass.

Most chat calls are text messages and a few sampling keywords. For such a call every
check `Planner.prepare` makes passes and every requirement it reads is absent, so what it
returns depends only on the group: its routes, sifted by the plain chat's needs, and the
express lane to the first. This module recognises that shape, by an allow-list, and
builds the `Call` from what the group's first plain call left behind; anything else (a
keyword not on the list, a content part, a message with more than a role, a name and a
string, a string that is not ASCII) is read in full by the planner, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.validate import check_call
from ..endpoints import Endpoint
from ..policies.candidate import Candidate
from ..policies.requirements import Requirements
from .express import Call, Lane
from .seam import settings

__all__ = ["PLAIN_KWARGS", "Known", "call_of", "is_plain", "lane_of", "made", "served"]

PLAIN_KWARGS = frozenset(
    {
        "temperature",
        "top_p",
        "seed",
        "user",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        # Counted arguments: checked by the same `check_call` as in the full reading.
        "max_tokens",
        "max_completion_tokens",
        "n",
    }
)
"""Keywords the router reads nothing of beyond `check_call` (LiteLLM gets them as given):
on this list and no other, a call may be plain."""

_MESSAGE_KEYS = frozenset({"role", "content", "name"})

Known = tuple[tuple[Candidate, ...], Requirements, tuple[Sequence[Any], Sequence[Any]], Lane | None]
"""What a group's plain chat call is planned with: its routes, the plain chat's needs,
those routes sifted by them, and the express lane when the group has one."""


def is_plain(messages: Any, kwargs: Mapping[str, Any]) -> bool:
    """Whether a chat call is plain: a non-empty list of dicts, each only a role, a name
    and ASCII content, and keywords only from `PLAIN_KWARGS`. Anything else is False,
    and the planner reads the call in full."""
    if type(messages) is not list or not messages:
        return False
    if kwargs and not PLAIN_KWARGS.issuperset(kwargs):
        return False
    for m in messages:
        if type(m) is not dict or not _MESSAGE_KEYS.issuperset(m):
            return False
        content = m.get("content")
        # ASCII text cannot hold a lone surrogate: the one thing the full check reads.
        if type(content) is not str or not content.isascii():
            return False
    return True


def served(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A call's keywords without what a server adds to every call it makes for a client:
    `scope=` (the caller reads it apart) and `on_device=False` (the default, which changes
    nothing); None when `on_device` is anything else, which the full reading reads."""
    if "scope" not in kwargs and "on_device" not in kwargs:
        return kwargs
    if kwargs.get("on_device", False) is not False:
        return None
    return {k: v for k, v in kwargs.items() if k != "scope" and k != "on_device"}


def call_of(
    endpoint: Endpoint,
    group: str,
    known: Known,
    messages: list[Any],
    kwargs: Mapping[str, Any],
    deadline: float | None,
    wait: bool,
) -> Call:
    """The `Call` the full reading would return for a plain call to `group` (see
    `is_plain`): LiteLLM's settings and the counted arguments checked as there."""
    _check(kwargs)
    return made(endpoint, group, known, {**kwargs, "messages": messages}, deadline, wait)


def lane_of(known: Known | None, messages: Any, kwargs: Mapping[str, Any]) -> Lane | None:
    """The express lane a plain call takes, checked as `call_of` checks it, when the call is
    plain (`is_plain`) and `known` (what its group's first plain call left) has a lane;
    else None, and nothing is checked."""
    if known is None or known[3] is None or not is_plain(messages, kwargs):
        return None
    settings.check_globals()  # `_check`, without its frame: every plain call passes here
    if kwargs:
        check_call(kwargs)
    lane = known[3]
    limit = lane.candidate.window
    if limit is not None and _size(messages, kwargs) > limit:
        return None  # it may not fit the route's window: the plan measures it
    return lane


def made(
    endpoint: Endpoint,
    group: str,
    known: Known,
    call_kwargs: dict[str, Any],
    deadline: float | None,
    wait: bool,
) -> Call:
    """The `Call` of a plain call to `group` whose keywords (messages included) are
    `call_kwargs`, already checked."""
    candidates, needs, sifted, lane = known
    return Call(
        endpoint=endpoint, group=group, candidates=candidates, needs=needs, call_kwargs=call_kwargs, sifted=sifted, seconds=deadline, timeout=None, retry=None, wait=wait,
        previous=None, lane=lane,
    )


def _size(messages: list[Any], kwargs: Mapping[str, Any]) -> int:
    """A bound on a plain call's prompt bytes plus its reply cap (its text is ASCII: one
    byte a character; 32 bytes a message covers its role, name and keys)."""
    caps = [v for k in ("max_tokens", "max_completion_tokens") if type(v := kwargs.get(k)) is int]
    return sum(len(m["content"]) + len(m.get("name") or "") + 32 for m in messages) + max(caps, default=0)


def _check(kwargs: Mapping[str, Any]) -> None:
    """What the full reading checks of a plain call: LiteLLM's globals, and the counted
    arguments (`check_call`) when there are any."""
    settings.check_globals()
    if kwargs:
        check_call(kwargs)
