"""What a route can do: LiteLLM's model info first, then the route's own declaration.

LiteLLM's `supports_*` helpers answer False for a model they do not know, so "unknown" and
"known not to" look alike. This module asks for the model's info first: a model LiteLLM
does not know, on a route that declares nothing, is *unusable* rather than guessed at. A
route that declares some capabilities is known by its declaration, and whatever it does not
declare is taken as missing (refuse rather than guess).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Capabilities", "Capability", "parse_declared"]


class Capability(StrEnum):
    """One thing a request may need from a model."""

    TOOLS = "tools"
    IMAGES = "images"
    STRUCTURED_OUTPUT = "structured_output"
    PROMPT_CACHING = "prompt_caching"
    THINKING = "thinking"
    STREAMING = "streaming"


# The model-info keys LiteLLM uses for each capability (streaming is asked separately).
INFO_KEYS: Mapping[Capability, str] = {
    Capability.TOOLS: "supports_function_calling",
    Capability.IMAGES: "supports_vision",
    Capability.STRUCTURED_OUTPUT: "supports_response_schema",
    Capability.PROMPT_CACHING: "supports_prompt_caching",
    Capability.THINKING: "supports_reasoning",
}


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The capabilities a route has, and where that knowledge came from.

    `known` is False when neither LiteLLM nor the route said anything about the model; such
    a route is unusable, and `why_unknown` says what to do about it. `source` is
    "litellm", "declared" or "litellm+declared".
    """

    have: frozenset[Capability]
    known: bool
    source: str
    why_unknown: str = ""

    def __contains__(self, item: object) -> bool:
        return item in self.have

    def describe(self) -> str:
        """Names of what the route can do, comma-separated, or "nothing declared"."""
        if not self.known:
            return "unknown"
        return ", ".join(c.value for c in Capability if c in self.have) or "plain chat only"


def parse_declared(
    declared: Mapping[str, object] | None, where: str = "capabilities"
) -> dict[Capability, bool]:
    """Validate a route's capability overrides: known names, boolean values.

    Raises `ConfigError` naming the key and listing the valid names.
    """
    from .errors import ConfigError

    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise ConfigError(f"{where} must be a mapping like {{'tools': True}}, got {declared!r}")
    out: dict[Capability, bool] = {}
    for key, value in declared.items():
        try:
            cap = Capability(str(key))
        except ValueError:
            names = ", ".join(c.value for c in Capability)
            raise ConfigError(f"{where}.{key} is not a capability; use one of: {names}") from None
        if not isinstance(value, bool):
            raise ConfigError(f"{where}.{key} must be true or false, got {value!r}")
        out[cap] = value
    return out


def resolve(
    model: str,
    info: Mapping[str, object] | None,
    streams: bool,
    declared: Mapping[Capability, bool],
) -> Capabilities:
    """Combine LiteLLM's info for `model` (None when unknown) with the route's overrides."""
    have: set[Capability] = set()
    if info is not None:
        have = {cap for cap, key in INFO_KEYS.items() if info.get(key) is True}
        if streams:
            have.add(Capability.STREAMING)
    for cap, value in declared.items():
        (have.add if value else have.discard)(cap)
    if info is None and not declared:
        return Capabilities(
            frozenset(),
            known=False,
            source="none",
            why_unknown=(
                f"LiteLLM does not know model {model!r} and the route declares no capabilities;"
                " declare them, e.g. capabilities={'tools': True, 'streaming': True}"
            ),
        )
    source = (
        "litellm+declared"
        if info is not None and declared
        else ("litellm" if info is not None else "declared")
    )
    return Capabilities(frozenset(have), known=True, source=source)
