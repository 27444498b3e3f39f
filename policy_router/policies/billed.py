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

__all__ = ["CAP_KEYS", "CHOICE_KEYS", "FREE", "SERVER_STATE", "TOOL_FIELDS", "plain_tool", "unbounded_by"]

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

CAP_KEYS = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "maxOutputTokens",
        "num_predict",
        "maxTokens",
        "max_new_tokens",
        "max_tokens_to_sample",
        "maxTokenCount",
        "max_gen_len",
    }
)
"""The names providers read a reply cap under (OpenAI, Anthropic, Gemini, Ollama, Bedrock,
Hugging Face, Cohere, Meta), at the top of the body or one level down."""

CHOICE_KEYS = frozenset(
    {"n", "candidate_count", "candidateCount", "best_of", "num_return_sequences", "numberOfResults"}
)
"""The names providers read a count of replies under."""


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
# A tool written without a `type` is plain only in one of these shapes (the keys it may
# have, and the one it must): OpenAI's bare function and flat function (as `functions=`
# takes them), Anthropic's, Gemini's declarations, Bedrock's tool spec and cache point.
_PLAIN_SHAPES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"function"}), "function"),
    (frozenset({"name", "description", "parameters", "strict"}), "name"),
    (frozenset({"name", "description", "input_schema", "cache_control", "strict"}), "input_schema"),
    (frozenset({"functionDeclarations"}), "functionDeclarations"),
    (frozenset({"function_declarations"}), "function_declarations"),
    (frozenset({"toolSpec"}), "toolSpec"),
    (frozenset({"cachePoint"}), "cachePoint"),
)


def plain_tool(tool: Any) -> bool:
    """Whether a tool entry is a function the caller runs (billed as its schema alone).

    Decided by an allow-list: a `type` of `function` or `custom`, or, without a `type`, one
    of the plain shapes of OpenAI, Anthropic, Gemini or Bedrock. Anything else (Gemini's
    `{"googleSearch": {}}`, `{"codeExecution": {}}`, `{"urlContext": {}}`, Anthropic's
    `{"type": "web_search_20250305"}`, a tool object nobody can read) is run by the provider,
    who bills what it reads."""
    dump = getattr(tool, "model_dump", None)
    if callable(dump) and not isinstance(tool, Mapping):
        tool = dump(exclude_none=True)
    if not isinstance(tool, Mapping):
        return False
    kind = tool.get("type")
    if kind is not None:
        return kind in _PLAIN_TOOLS
    keys = frozenset(str(k) for k in tool)
    return any(keys <= allowed and needed in keys for allowed, needed in _PLAIN_SHAPES)


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
            if not plain_tool(tool):
                kind = tool.get("type") if isinstance(tool, Mapping) else None
                what = repr(kind) if kind is not None else _shape(tool)
                return (
                    f"{field}[{i}] is a {what} tool: the provider runs it itself and bills "
                    "what it reads"
                )
    return None


def _shape(tool: Any) -> str:
    if isinstance(tool, Mapping):
        return "/".join(sorted(str(k) for k in tool)) or "{}"
    return type(tool).__name__
