"""The context-window rule (`policies.window`) applied to a call: the endpoint says where
its prompt and reply caps are, the prompt's bound is measured only when a route's window
is known, and LiteLLM's counter (`seam.tokens`) counts a prompt that may not fit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..endpoints import Endpoint
from ..ground.records import Skip
from ..policies import window
from ..policies.bounds import IMAGE_TOKENS, prompt_bound
from ..policies.candidate import Candidate
from .seam import model_info, tokens

__all__ = ["fits", "fitted"]


def fitted(
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
) -> tuple[Sequence[Candidate], Sequence[Skip]]:
    """`sifted` with the routes the prompt or its reply cap cannot fit moved to the skips
    (the same tuple when every route may take it); see `policies.window`."""
    return window.fitted(
        sifted,
        kwargs,
        generates=endpoint.generates,
        reply_caps=endpoint.reply_caps,
        bound=lambda: prompt_bound(
            kwargs, IMAGE_TOKENS, texts=endpoint.prompt, schema_of=model_info.response_format_schema
        ),
        count=tokens.counter(endpoint.prompt, kwargs),
    )


def fits(
    candidate: Candidate,
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
) -> bool:
    """Whether every route of `sifted` may take the prompt (`candidate`, the express lane's,
    with no window and no output limit known: yes at once)."""
    if candidate.window is None and candidate.most_reply is None:
        return True
    return fitted(endpoint, kwargs, sifted) is sifted
