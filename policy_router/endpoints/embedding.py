"""Embeddings: `litellm.embedding` / `aembedding`, `input` in, vectors out, billed by input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.validate import check_texts
from ..ground.errors import ConfigError
from ..policies.requirements import Requirements
from .base import Endpoint
from .reading import usage_of

__all__ = ["EMBEDDING"]


def _check(kwargs: Mapping[str, Any]) -> None:
    value = kwargs.get("input")
    ok = isinstance(value, str) or (
        isinstance(value, list)
        and bool(value)
        and all(
            (isinstance(v, str | int) and not isinstance(v, bool))
            or (isinstance(v, list) and all(isinstance(t, int) for t in v))
            for v in value
        )
    )
    if not ok:
        raise ConfigError(
            "input must be a string or a non-empty list of strings (or of token ids), "
            f"got {type(value).__name__}"
        )
    if kwargs.get("stream"):
        raise ConfigError("stream=True is not a thing for embeddings: remove it")
    check_texts(kwargs, ("input",))


def _requirements(kwargs: Mapping[str, Any]) -> Requirements:
    return Requirements(endpoint="embedding")


EMBEDDING = Endpoint(
    name="embedding",
    function="embedding",
    afunction="aembedding",
    prompt=("input",),
    reply_caps=(),
    choices=(),
    generates=False,
    check=_check,
    requirements=_requirements,
    usage=usage_of,
    stream=None,
)
