"""Which parts of a call a provider bills, decided safe by default.

Every keyword argument a call sends is taken to carry billed input, unless it is on a short
allow-list of control fields known to be free (`model`, `stream`, `temperature`, the reply
caps, credentials, ...): a field nobody listed here — an endpoint's own (`suffix`, Responses'
`text`), a provider's, one LiteLLM adds next year — is counted, not skipped.

Some fields make the provider bill what the request cannot show: state it keeps
(`previous_response_id`, a `conversation`, a stored `prompt` template) and tools it runs
itself (web search, file search, a code interpreter: any tool whose type is not a plain
function). A request that carries one has no finite bound; `unbounded_by` names the field,
so a strict budget can refuse it before sending and say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FREE", "SERVER_STATE", "TOOL_FIELDS", "unbounded_by"]

FREE = frozenset(
    {
        # where and how the call goes; read by LiteLLM or the HTTP client, not billed
        "model", "api_key", "api_base", "base_url", "api_version", "custom_llm_provider",
        "organization", "timeout", "request_timeout", "stream_timeout", "num_retries",
        "max_retries", "extra_headers", "headers", "drop_params", "logger_fn", "metadata",
        "litellm_metadata", "user", "safety_identifier", "prompt_cache_key", "mock_response",
        "caching", "no-log", "tags", "stream", "stream_options", "background", "store",
        "service_tier", "parallel_tool_calls", "include", "truncation",
        # how the reply is sampled and capped: the reply bound reads the caps
        "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of",
        "temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty",
        "logit_bias", "logprobs", "top_logprobs", "stop", "reasoning_effort", "verbosity",
        "echo", "encoding_format", "dimensions", "modalities", "thinking", "reasoning",
        # the router's own keywords, taken out before LiteLLM sees the call
        "on_device", "needs", "deadline", "retry", "wait_for_capacity", "endpoint",
    }
)
"""Keyword arguments known not to carry billed input. Everything else is counted."""

TOOL_FIELDS = ("tools", "functions")

SERVER_STATE: Mapping[str, str] = {
    "previous_response_id": "the provider bills the stored conversation it continues",
    "conversation": "the provider bills the stored conversation it continues",
    "prompt": "a stored prompt template is expanded and billed by the provider",
    "web_search_options": "the provider runs a web search and bills what it reads",
    "file_search": "the provider searches its own files and bills what it reads",
}
"""Fields whose content the provider bills from its own state: no bound is possible.
(`prompt` counts here only when it is a stored template, a mapping with an `id`.)"""

# A tool the caller describes and runs: its schema is the whole billed input.
_PLAIN_TOOLS = frozenset({"function", "custom"})


def unbounded_by(kwargs: Mapping[str, Any], texts: Iterable[str] = ()) -> str | None:
    """Why the call's input has no bound, naming the field, or None when it has one.

    `texts` names the endpoint's prompt fields (a text completion's `prompt` is its text,
    not a stored template)."""
    prompts = set(texts)
    for name, why in SERVER_STATE.items():
        value = kwargs.get(name)
        if value is None or value is False or value == "":
            continue
        if name in prompts and not (isinstance(value, Mapping) and "id" in value):
            continue
        return f"{name}: {why}"
    for field in TOOL_FIELDS:
        tools = kwargs.get(field)
        if not isinstance(tools, list | tuple):
            continue
        for i, tool in enumerate(tools):
            kind = tool.get("type", "function") if isinstance(tool, Mapping) else "function"
            if kind not in _PLAIN_TOOLS:
                return (
                    f"{field}[{i}] is a {kind!r} tool: the provider runs it itself and bills "
                    "what it reads"
                )
    return None
