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

from ..ground import catalog
from ..ground.capability import ENDPOINTS, MODES, Capability

__all__ = ["INFO_KEYS", "Capabilities", "resolve"]


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
    """What the route can do (`Capability.TOOLS`, `Capability.STREAMING`, ...)."""
    known: bool
    """False when neither LiteLLM nor the route said anything about the model."""
    source: str
    """Where the knowledge came from: "litellm", "declared" or "litellm+declared"."""
    why_unknown: str = ""
    """What to do about an unknown model (empty when known)."""

    def __contains__(self, item: object) -> bool:
        return item in self.have

    def describe(self) -> str:
        """What the route can do, comma-separated ("tools, streaming"); the endpoints it
        serves are named when they are not a chat model's ("embedding only")."""
        if not self.known:
            return "unknown"
        features = ", ".join(c.value for c in Capability if c in self.have and c not in ENDPOINTS)
        endpoints = self.have & ENDPOINTS
        if endpoints == MODES["chat"]:
            return features or "plain chat only"
        served = ", ".join(c.value for c in Capability if c in endpoints) or "nothing"
        return f"{features}; serves {served} only" if features else f"serves {served} only"


def resolve(
    model: str,
    info: Mapping[str, object] | None,
    streams: bool,
    declared: Mapping[Capability, bool],
) -> Capabilities:
    """Combine LiteLLM's info for `model` (None when unknown) with the route's overrides.

    What the route serves comes from LiteLLM's `mode` (a chat model serves chat, the
    Responses API and text completions); a route that declares capabilities but no endpoint
    serves what a chat model does, and one that declares an endpoint serves what it
    declares.
    """
    have: set[Capability] = set()
    if info is not None:
        have = {cap for cap, key in INFO_KEYS.items() if info.get(key) is True}
        if streams:
            have.add(Capability.STREAMING)
        have |= MODES.get(str(info.get("mode") or "chat"), frozenset())
    if declared and not (set(declared) & ENDPOINTS) and info is None:
        have |= MODES["chat"]
    if any(declared.get(e) for e in ENDPOINTS):
        have -= ENDPOINTS - {e for e in ENDPOINTS if declared.get(e)}
    for cap, value in declared.items():
        (have.add if value else have.discard)(cap)
    if info is None and not declared:
        close = catalog.close_models(model)
        meant = f"; did you mean {' or '.join(close)}?" if close else ""
        return Capabilities(
            frozenset(),
            known=False,
            source="none",
            why_unknown=(
                f"LiteLLM does not know model {model!r}{meant} If it is your own model, "
                "declare what it can do, e.g. capabilities={'tools': True, 'streaming': True}"
            ),
        )
    source = (
        "litellm+declared"
        if info is not None and declared
        else ("litellm" if info is not None else "declared")
    )
    return Capabilities(frozenset(have), known=True, source=source)
