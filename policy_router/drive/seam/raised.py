"""The exceptions the router raises in a provider's name: LiteLLM's own classes, for what
the provider did though LiteLLM did not raise it (a 200 with no choices, a stream cut
short or stalled, an attempt past its first-token limit), so a caller's `except
litellm.Timeout` or `except litellm.InternalServerError` keeps working."""

from __future__ import annotations

import litellm

from ...ground.route import Route

__all__ = ["EmptyAnswerError", "empty_answer", "first_token_error", "stall_error", "stream_cut_error"]


class EmptyAnswerError(litellm.exceptions.InternalServerError):
    """A 200 whose answer says nothing (`choices: []`): LiteLLM's `InternalServerError`, so
    a caller's `except litellm.InternalServerError` catches it when it is the last. The
    provider had the request and may bill it, so its attempt is charged its reservation."""


def empty_answer(route: Route) -> Exception:
    """The exception for a whole answer with no choices (see `EmptyAnswerError`)."""
    return EmptyAnswerError(
        message="the provider answered 200 with no choices: an empty answer",
        model=route.model,
        llm_provider=route.provider or "unknown",
    )


def first_token_error(route: Route, limit: float) -> Exception:
    """The exception for an attempt its first-token limit ended: LiteLLM's `Timeout`, as a
    read timeout would have been, so `except litellm.Timeout` catches it when it is last."""
    return litellm.exceptions.Timeout(
        message=f"no first token within {limit:g} s (the route's first_token_timeout)",
        model=route.model,
        llm_provider=route.provider or "unknown",
    )


def stall_error(route: Route, seconds: float, chunks: int, text: str) -> Exception:
    """The exception for a stream that stalled after its first chunk: a cut, LiteLLM's own
    `MidStreamFallbackError` with the text so far."""
    return litellm.exceptions.MidStreamFallbackError(
        message=(
            f"the stream stalled: no chunk for {seconds:g} s after {chunks} "
            "(the route's stall_timeout)"
        ),
        model=route.model,
        llm_provider=route.provider or "unknown",
        generated_content=text,
    )


def stream_cut_error(route: Route, text: str) -> Exception:
    """The exception for a stream that ended without a finish reason.

    It is LiteLLM's own `MidStreamFallbackError`, the class LiteLLM raises when it notices
    the same thing itself, with the text received so far as `generated_content`.
    """
    return litellm.exceptions.MidStreamFallbackError(
        message="the stream ended without a finish reason: the reply was cut short",
        model=route.model,
        llm_provider=route.provider or "unknown",
        generated_content=text,
    )
