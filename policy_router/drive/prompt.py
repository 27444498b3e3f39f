"""A request's prompt, measured once for every check that reads it.

The budget and a tokens-per-minute limit read the prompt's bound (`policies.bounds`:
UTF-8 bytes, tools and images at their most), the context window reads it too and, for a
prompt the bound does not show to fit, its tokens by each route's tokenizer, and a price
ordering reads its tokens by LiteLLM's default tokenizer. A `Prompt` measures each the
first time it is asked, never before and never twice: a call that tries its group's
express lane and then its plan, or is explained, measures its prompt as often as one that
does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..endpoints import Endpoint
from ..ground.route import Route
from ..policies.bounds import prompt_bound
from .seam import model_info, tokens

__all__ = ["Prompt"]


class Prompt:
    """The prompt `kwargs` carry under `endpoint`'s prompt keywords (see the module
    docstring)."""

    __slots__ = ("_bounds", "_by_route", "_endpoint", "_kwargs", "_tokens")

    def __init__(self, endpoint: Endpoint, kwargs: Mapping[str, Any]) -> None:
        self._endpoint = endpoint
        self._kwargs = kwargs
        self._bounds: dict[int, int | None] = {}
        self._tokens: int | None = None
        self._by_route: Callable[[Route], int] | None = None

    def bound(self, image_tokens: int) -> int | None:
        """An upper bound on the prompt tokens any provider can bill, each image counted
        as `image_tokens`; None when a part of the prompt has none."""
        if image_tokens not in self._bounds:
            self._bounds[image_tokens] = prompt_bound(
                self._kwargs, image_tokens, texts=self._endpoint.prompt,
                schema_of=model_info.response_format_schema,
            )
        return self._bounds[image_tokens]

    def tokens(self) -> int:
        """The prompt's tokens by LiteLLM's default tokenizer: one measure for every route."""
        if self._tokens is None:
            self._tokens = model_info.count_tokens(self._kwargs, self._endpoint.prompt)
        return self._tokens

    def tokens_for(self, route: Route) -> int:
        """The prompt's tokens as `route`'s tokenizer counts them (`seam.tokens`)."""
        if self._by_route is None:
            self._by_route = tokens.counter(self._endpoint.prompt, self._kwargs)
        return self._by_route(route)
