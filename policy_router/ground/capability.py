"""What a request may need of a model, by name: features and the endpoints it serves.

The names only, and the parsing of a route's own declaration; what a model really can do
(LiteLLM's info merged with the declaration) is `policies.capabilities`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from .errors import ConfigError

__all__ = ['Capability', 'ENDPOINTS', 'MODES', 'parse_declared']


class Capability(StrEnum):
    """One thing a request may need from a model: a feature, or the endpoint it serves."""

    TOOLS = "tools"
    IMAGES = "images"
    STRUCTURED_OUTPUT = "structured_output"
    PROMPT_CACHING = "prompt_caching"
    THINKING = "thinking"
    STREAMING = "streaming"
    CHAT = "chat"
    EMBEDDING = "embedding"
    RESPONSES = "responses"
    COMPLETION = "completion"



ENDPOINTS = frozenset(
    {Capability.CHAT, Capability.EMBEDDING, Capability.RESPONSES, Capability.COMPLETION}
)
"""The capabilities that say which kind of call a route serves."""



# LiteLLM's model-info `mode` -> the endpoints a model of that mode serves. A chat model
# serves the Responses API and text completions too, through LiteLLM's own bridges.
MODES: Mapping[str, frozenset[Capability]] = {
    "chat": frozenset({Capability.CHAT, Capability.RESPONSES, Capability.COMPLETION}),
    "responses": frozenset({Capability.RESPONSES}),
    "completion": frozenset({Capability.COMPLETION}),
    "embedding": frozenset({Capability.EMBEDDING}),
}



def parse_declared(
    declared: Mapping[str, object] | None, where: str = "capabilities"
) -> dict[Capability, bool]:
    """Validate a route's capability overrides: known names, boolean values.

    Raises `ConfigError` naming the key and listing the valid names.
    """
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
