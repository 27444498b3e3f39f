"""Requirements read off LiteLLM kwargs, and what a route lacks."""

from __future__ import annotations

from typing import Any

import pytest

from policy_router import Capability, ConfigError, Requirements
from policy_router.policies.capabilities import resolve

TEXT = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"messages": TEXT}, Requirements()),
        ({"messages": TEXT, "tools": [{"type": "function"}]}, Requirements(tools=True)),
        ({"messages": TEXT, "functions": [{"name": "f"}]}, Requirements(tools=True)),
        ({"messages": TEXT, "tool_choice": "auto"}, Requirements(tools=True)),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is this"},
                            {
                                "type": "image_url",
                                "image_url": {"url": "data:image/png;base64,AAAA"},
                            },
                        ],
                    }
                ]
            },
            Requirements(images=True),
        ),
        (
            {"messages": TEXT, "response_format": {"type": "json_object"}},
            Requirements(structured_output=True),
        ),
        (
            {"messages": TEXT, "response_format": {"type": "json_schema", "json_schema": {}}},
            Requirements(structured_output=True),
        ),
        ({"messages": TEXT, "response_format": {"type": "text"}}, Requirements()),
        (
            {
                "messages": [
                    {
                        "role": "system",
                        "content": [
                            {"type": "text", "text": "long", "cache_control": {"type": "ephemeral"}}
                        ],
                    }
                ]
            },
            Requirements(prompt_caching=True),
        ),
        ({"messages": TEXT, "reasoning_effort": "low"}, Requirements(thinking=True)),
        ({"messages": TEXT, "thinking": {"type": "enabled"}}, Requirements(thinking=True)),
        ({"messages": TEXT, "stream": True}, Requirements(streaming=True)),
    ],
)
def test_requirements_are_read_off_kwargs(kwargs: dict[str, Any], expected: Requirements) -> None:
    """Each LiteLLM kwarg that implies a capability is read as a requirement."""
    assert Requirements.from_kwargs(kwargs) == expected


def test_needs_add_and_never_remove() -> None:
    """needs= and the floor only add to what the kwargs say."""
    read = Requirements(tools=True)
    assert read | Requirements.of({"images"}) == Requirements(tools=True, images=True)
    assert read | Requirements.of({"tools": False}) == read
    assert Requirements.of("streaming") == Requirements(streaming=True)


def test_unknown_need_names_the_valid_ones() -> None:
    """An unknown requirement is refused with the list of valid names."""
    with pytest.raises(ConfigError, match="needs='vision' is not a requirement; use any of"):
        Requirements.of({"vision"})


def test_unmet_by_names_what_is_missing() -> None:
    """unmet_by lists the required capabilities a route lacks, in a stable order."""
    caps = resolve("openai/x", None, False, {Capability.TOOLS: True})
    needs = Requirements(tools=True, images=True, thinking=True)
    assert needs.unmet_by(caps) == (Capability.IMAGES, Capability.THINKING)


def test_capabilities_come_from_litellm_then_overrides() -> None:
    """Known models take LiteLLM's info; a declaration overrides it either way."""
    info = {"supports_function_calling": True, "supports_vision": True}
    caps = resolve("m", info, True, {Capability.IMAGES: False, Capability.THINKING: True})
    chat = {Capability.CHAT, Capability.RESPONSES, Capability.COMPLETION}  # a chat model's
    assert caps.have == {Capability.TOOLS, Capability.STREAMING, Capability.THINKING, *chat}
    assert caps.source == "litellm+declared"
    unknown = resolve("m", None, False, {})
    assert not unknown.known and "declare what it can do" in unknown.why_unknown
