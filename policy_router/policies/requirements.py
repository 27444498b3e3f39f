"""Requirements: what a request needs from whatever serves it, read off LiteLLM's kwargs.

A caller does not restate what their call already says: tools in the kwargs mean the
model must do tools. `on_device=True` and `needs=` add to what is read; they never take
anything away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from ..ground.capability import ENDPOINTS, Capability
from ..ground.errors import ConfigError
from .capabilities import Capabilities

__all__ = ["Requirements"]


@dataclass(frozen=True, slots=True)
class Requirements:
    """What a request needs: capabilities, the endpoint it calls, and whether the on-device
    floor is set.

    Combine two with `|`. `unmet_by(capabilities)` names what a route lacks, the endpoint
    included (`endpoint` is "chat", "embedding", "responses" or "completion", set by which
    router function was called); the floor is not a capability and is checked against the
    route's reach instead.
    """

    tools: bool = False
    """`tools`, `functions` or `tool_choice` is given: a route must call functions."""
    images: bool = False
    """A message carries an image: a route must read images."""
    structured_output: bool = False
    """`response_format` asks for a JSON schema or object: a route must follow it."""
    prompt_caching: bool = False
    """`cache_control` appears in the messages: a route must cache prompts."""
    thinking: bool = False
    """`reasoning_effort` or `thinking` is asked: a route must reason."""
    streaming: bool = False
    """`stream=True`: a route must stream."""
    on_device: bool = False
    """The on-device floor: only `Reach.ON_DEVICE` routes, and no fall back to a vendor."""
    endpoint: str = "chat"
    """Which router function was called: "chat", "embedding", "responses" or "completion"."""

    @classmethod
    def of(cls, needs: Requirements | Iterable[str] | Mapping[str, bool] | None) -> Requirements:
        """Accept a `Requirements`, names like `{"tools", "images"}`, or a mapping of flags.

        Raises `ConfigError` naming an unknown requirement and listing the valid ones.
        """
        if needs is None:
            return cls()
        if isinstance(needs, Requirements):
            return needs
        if isinstance(needs, str):
            needs = [needs]
        valid = {f.name for f in fields(cls)} - {"endpoint"}
        if not isinstance(needs, Iterable):
            raise ConfigError(
                f"needs must be requirement names or a mapping of them to flags, got {needs!r}; "
                f"use any of: {', '.join(sorted(valid))}"
            )
        items = needs.items() if isinstance(needs, Mapping) else ((n, True) for n in needs)
        flags: dict[str, bool] = {}
        for name, value in items:
            if not isinstance(name, str) or name not in valid:
                raise ConfigError(
                    f"needs={name!r} is not a requirement; use any of: {', '.join(sorted(valid))}"
                )
            if not isinstance(value, bool):
                raise ConfigError(f"needs[{name!r}] must be true or false, got {value!r}")
            flags[name] = value
        return cls(**flags)  # type: ignore[arg-type]

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> Requirements:
        """Read requirements off a LiteLLM call's keyword arguments.

        tools/functions/tool_choice → tools; an `image_url` content part → images;
        `response_format` of type json_schema or json_object (or a pydantic model) →
        structured output; `cache_control` anywhere in the messages → prompt caching;
        `reasoning_effort`/`thinking` → thinking; `stream=True` → streaming.
        """
        images, caching = _scan(kwargs.get("messages") or ())
        flags = (
            bool(kwargs.get("tools") or kwargs.get("functions") or kwargs.get("tool_choice")),
            images,
            _wants_structure(kwargs.get("response_format")),
            caching,
            bool(kwargs.get("reasoning_effort") or kwargs.get("thinking")),
            bool(kwargs.get("stream")),
        )
        return _chat(flags)

    def __or__(self, other: Requirements) -> Requirements:
        return Requirements(
            tools=self.tools or other.tools,
            images=self.images or other.images,
            structured_output=self.structured_output or other.structured_output,
            prompt_caching=self.prompt_caching or other.prompt_caching,
            thinking=self.thinking or other.thinking,
            streaming=self.streaming or other.streaming,
            on_device=self.on_device or other.on_device,
            endpoint=other.endpoint if other.endpoint != "chat" else self.endpoint,
        )

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The capabilities required (the floor excluded)."""
        return _needed(self)

    def unmet_by(self, capabilities: Capabilities) -> tuple[Capability, ...]:
        """The required capabilities `capabilities` lacks, in a stable order."""
        missing = _needed(self) - capabilities.have
        return tuple(c for c in _ALL if c in missing) if missing else ()

    def describe(self) -> str:
        """A short phrase: "tools, streaming, on-device only", or "nothing special"; an
        endpoint other than chat comes first ("embedding, on-device only")."""
        names = [] if self.endpoint == "chat" else [self.endpoint]
        names += [text for flag, text in _FEATURE_WORDS if getattr(self, flag)]
        if self.on_device:
            names.append("on-device only")
        return ", ".join(names) or "nothing special"


_ALL = tuple(Capability)
_FEATURES = tuple(c for c in Capability if c not in ENDPOINTS)
# Each feature's flag and words, read once: an enum member's `value` is a descriptor call,
# and every answer's journey describes its request.
_FEATURE_WORDS = tuple((c.value, c.value.replace("_", " ")) for c in _FEATURES)


@lru_cache(maxsize=256)
def _needed(needs: Requirements) -> frozenset[Capability]:
    # Asked once per route per request: cached, since a request's needs repeat.
    return frozenset(c for c in _FEATURES if getattr(needs, c.value)) | {Capability(needs.endpoint)}


@lru_cache(maxsize=64)
def _chat(flags: tuple[bool, bool, bool, bool, bool, bool]) -> Requirements:
    # A chat call's requirements are one of 64 values: made once each.
    tools, images, structured_output, prompt_caching, thinking, streaming = flags
    return Requirements(
        tools=tools, images=images, structured_output=structured_output,
        prompt_caching=prompt_caching, thinking=thinking, streaming=streaming,
    )


def _scan(messages: Any) -> tuple[bool, bool]:
    """Whether the messages carry an image part, and a `cache_control` marker, in one pass
    (a marker may sit on a message, a content part, or deeper)."""
    images = caching = False
    for message in messages if isinstance(messages, list | tuple) else ():
        if not isinstance(message, Mapping):
            continue
        caching = caching or "cache_control" in message
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping):
                    images = images or part.get("type") in _IMAGE_TYPES or "image_url" in part
                    caching = caching or _has_key(part, "cache_control")
    return images, caching


_IMAGE_TYPES = frozenset({"image_url", "input_image", "image"})


def _wants_structure(response_format: Any) -> bool:
    if response_format is None:
        return False
    if isinstance(response_format, Mapping):
        return response_format.get("type") in ("json_schema", "json_object")
    # LiteLLM accepts a pydantic model class as response_format.
    return isinstance(response_format, type)


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, Mapping):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_key(v, key) for v in value)
    return False
