"""The context-window rule (`policies.window`) applied to a call: the endpoint says where
its prompt and reply caps are, the prompt's bound is measured only when a route's window
is known, and LiteLLM's counter (`seam.tokens`) counts a prompt that may not fit, each
once a request (`drive.prompt`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..endpoints import Endpoint
from ..ground.records import Skip
from ..policies import window
from ..policies.bounds import IMAGE_TOKENS
from ..policies.candidate import Candidate
from .prompt import Prompt

__all__ = ["fits", "fitted"]


def fitted(
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
    prompt: Prompt | None = None,
) -> tuple[Sequence[Candidate], Sequence[Skip]]:
    """`sifted` with the routes the prompt or its reply cap cannot fit moved to the skips
    (the same tuple when every route may take it); see `policies.window`. `prompt` is the
    request's prompt as the other checks measure it (`drive.prompt`), when they do."""
    measured = prompt or Prompt(endpoint, kwargs)
    return window.fitted(
        sifted,
        kwargs,
        generates=endpoint.generates,
        reply_caps=endpoint.reply_caps,
        bound=lambda: measured.bound(IMAGE_TOKENS),
        count=measured.tokens_for,
    )


def fits(
    candidate: Candidate,
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
    prompt: Prompt | None = None,
) -> bool:
    """Whether every route of `sifted` may take the prompt (`candidate`, the express lane's,
    with no window and no output limit known: yes at once)."""
    if candidate.window is None and candidate.most_reply is None:
        return True
    return fitted(endpoint, kwargs, sifted, prompt) is sifted
