"""The context window as a requirement: a prompt that cannot fit a route is not sent there.

A route's window is what it declares (`Route(context_window=...)`) or LiteLLM's
`max_input_tokens` for its model (`Candidate.window`). The prompt plus the largest reply
cap the call sets must fit it, and the cap must not pass the model's output limit
(`Route(output_limit=...)`, else LiteLLM's `max_output_tokens`), else the route is skipped
before anything is sent: "prompt 150,211 tokens + reply cap 4,000 > window 128,000". The
reply cap is the largest the request sends: the call's, or the route's own default beside it.

What is measured is what is sent: the messages, the tools' schemas, the JSON schema of a
`response_format`, and each image part. Measuring costs nothing on the common call: the
prompt's bound (`policies.bounds.prompt_bound`: UTF-8 bytes, which no tokenizer exceeds,
tools and images at their most) fits every window, so nothing is counted; only a prompt
that may not fit is counted, by the counter the caller passes in (the drivers pass
LiteLLM's, `drive.seam.tokens`). The provider's own "too long" then moves the request to
a larger window (`core.following`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..ground.records import Check, Skip
from ..ground.route import Route
from .bounds import reply_tokens
from .candidate import Candidate

__all__ = ["fitted"]

Kept = tuple[Sequence[Candidate], Sequence[Skip]]  # the routes kept, and those skipped


def fitted(
    sifted: Kept,
    kwargs: Mapping[str, Any],
    *,
    generates: bool,
    reply_caps: Sequence[str],
    bound: Callable[[], int | None],
    count: Callable[[Route], int],
) -> Kept:
    """`sifted` with the routes whose window the prompt cannot fit, or whose output limit
    the call's reply cap passes, moved to the skips (the same tuple when every route may
    take it, as almost every call does).

    `generates` and `reply_caps` say whether the call has a reply and which keywords cap
    it; `bound()` is the prompt's bound in tokens (None: it has none), asked only when a
    route's window is known; `count(route)` is the prompt's tokens as `route` counts them,
    asked only for a prompt its bound does not show to fit."""
    eligible, skips = sifted
    windows = [c.window for c in eligible if c.window is not None]
    outputs = [c.most_reply for c in eligible if c.most_reply is not None]
    if not windows and not outputs:
        return sifted
    call_cap = (reply_tokens(kwargs, *reply_caps) or 0) if generates else 0
    caps = {c.id: _cap(c, kwargs, call_cap, generates, reply_caps) for c in eligible}
    most = max(caps.values(), default=0)
    prompt = bound() if windows else None  # only a window needs the prompt's size
    if (
        (not windows or (prompt is not None and prompt + most <= min(windows)))
        and (not outputs or most <= min(outputs))
    ):
        return sifted
    kept: list[Candidate] = []
    more: list[Skip] = []
    for c in eligible:
        cap = caps[c.id]
        if c.most_reply is not None and cap > c.most_reply:
            more.append(
                Skip(
                    c.name,
                    Check.CONTEXT_WINDOW,
                    f"reply cap {cap:,} tokens > the model's output limit {c.most_reply:,}",
                    detail={"cap": cap, "output_limit": c.most_reply},
                )
            )
            continue
        if c.window is None or (prompt is not None and prompt + cap <= c.window):
            kept.append(c)
            continue
        tokens = count(c.route)
        if tokens + cap <= c.window:
            kept.append(c)
            continue
        reply = f" + reply cap {cap:,}" if cap else ""
        more.append(
            Skip(
                c.name,
                Check.CONTEXT_WINDOW,
                f"prompt {tokens:,} tokens{reply} > window {c.window:,}",
                detail={"tokens": tokens, "cap": cap, "window": c.window},
            )
        )
    if not more:
        return sifted
    return tuple(kept), (*skips, *more)


def _cap(
    c: Candidate, kwargs: Mapping[str, Any], call_cap: int, generates: bool, reply_caps: Sequence[str]
) -> int:
    """The largest reply cap the request sends to `c`: the call's, and the route's own
    default caps beside it (a cap the call sets under the same name replaces the route's)."""
    if not generates or c.sent_cap is None:
        return call_cap
    return reply_tokens({**c.route.kwargs, **kwargs}, *reply_caps) or 0
