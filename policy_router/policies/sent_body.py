"""What a request body bills, read from the body LiteLLM built for the provider.

LiteLLM turns a call's keywords into each provider's own body before it sends it: the reply
cap becomes Anthropic's `max_tokens`, Gemini's `generationConfig.max_output_tokens`,
Ollama's `options.num_predict`; `extra_body` is merged at the top by the OpenAI SDK; a
`response_format` becomes a tool or a schema. The budget's reservation is made from the
call's keywords (`policies.bounds`), before any route is chosen; this module reads the body
as sent, so the checkpoint at the wire (`core.checkpoint`) can hold the reservation to it.

Every reading is on the safe side: of several reply caps the largest (vLLM and SGLang read
`max_completion_tokens` first, Anthropic and Mistral are sent `max_tokens`), of several
choice counts the largest, a cap that is not a positive whole number is no cap (Ollama's
`num_predict=-1` writes until the context is full), every byte of every string and key
counts toward the prompt except a short list of known control fields, and a tool that is
not a plain function in one of the spellings below is one the provider runs and bills.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .billed import CAP_KEYS, CHOICE_KEYS, FREE, plain_tool
from .bounds import utf8_bytes as _bytes

__all__ = ["body_of", "choices", "prompt_bytes", "reply_cap", "server_tool"]

# Top-level fields that hold the prompt itself: not searched for caps (a tool's schema may
# well have a property named max_tokens), always counted as billed input.
_PROMPT_FIELDS = frozenset(
    {
        "messages", "contents", "system", "system_instruction", "systemInstruction", "tools",
        "toolConfig", "tool_config", "input", "prompt", "instructions", "response_format",
        "text", "prediction", "functions", "tool_choice",
    }
)


def body_of(additional: Mapping[str, Any]) -> dict[str, Any] | None:
    """The body a provider receives, from LiteLLM's pre-call `additional_args`: its
    `complete_input_dict`, with `extra_body` merged at the top as the OpenAI SDK merges it
    (the SDK's fields win there, as on the wire). None when LiteLLM logged no body."""
    body = additional.get("complete_input_dict")
    if not isinstance(body, Mapping):
        return None
    merged = dict(body)
    extra = merged.pop("extra_body", None)
    if isinstance(extra, Mapping):
        merged.update(extra)
    return merged


def _containers(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield body
    for name, value in body.items():
        if name not in _PROMPT_FIELDS and isinstance(value, Mapping):
            yield value


def _numbers(body: Mapping[str, Any], names: frozenset[str]) -> list[Any]:
    return [c[name] for c in _containers(body) for name in names if name in c]


def reply_cap(body: Mapping[str, Any]) -> int | None:
    """The most reply tokens one choice may be written, by the body's own caps; None when
    it sets none that bounds the reply (none at all, or one that is not a positive whole
    number: a provider then writes up to the model's own limit)."""
    found = _numbers(body, CAP_KEYS)
    if not found:
        return None
    caps = [v for v in found if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if len(caps) < len(found):
        return None
    return max(caps)


def choices(body: Mapping[str, Any]) -> int:
    """How many replies the body asks for (1 when it says nothing)."""
    found = [v for v in _numbers(body, CHOICE_KEYS) if isinstance(v, int) and not isinstance(v, bool)]
    return max([1, *found])


def server_tool(body: Mapping[str, Any]) -> str | None:
    """The first tool in the body that the provider runs itself, named, or None.

    A plain tool is a function the caller describes and runs, in any of its spellings:
    OpenAI's (`{"type": "function", ...}`, `{"type": "custom", ...}`, a bare `{"function":
    ...}` or a flat `{"name", "parameters"}`), Anthropic's (`{"name", "input_schema"}`),
    Gemini's (`{"functionDeclarations": [...]}`) and Bedrock's (`{"toolSpec": ...}`). Any
    other entry (`{"googleSearch": {}}`, `{"codeExecution": {}}`, `{"type":
    "web_search_20250305"}`) is billed by what it reads.
    """
    for field in ("tools", "functions"):
        tools = body.get(field)
        if isinstance(tools, list | tuple):
            for i, tool in enumerate(tools):
                if not plain_tool(tool):
                    return f"{field}[{i}]"
    config = body.get("toolConfig")
    if isinstance(config, Mapping) and isinstance(config.get("tools"), list | tuple):
        for i, tool in enumerate(config["tools"]):
            if not plain_tool(tool):
                return f"toolConfig.tools[{i}]"
    return None


def prompt_bytes(body: Mapping[str, Any]) -> int:
    """A bound on the prompt tokens the body can bill: the UTF-8 bytes of its text.

    In the fields that carry the conversation (`messages`, `contents`, `system`, `input`,
    `prompt`, `instructions`, ...) every string counts: the text, the roles, the part
    types; the keys there are the API's structure, which no provider bills as text (its
    chat template, which it does bill, is the per-message allowance the reservation adds).
    Every other field counts whole, keys and strings and numbers as their digits: a tool's
    or a schema's property names are billed, and so is a field nobody listed. The control
    fields are left out, at the top and in settings objects (`billed.FREE`, the caps, the
    choice counts: the model, `stream`, `temperature`, Gemini's `generationConfig`
    `max_output_tokens`). No tokenizer makes more tokens of a text than it has bytes.
    """
    total = 0
    for name, value in body.items():
        if value is None or _control(name):
            continue
        if name in _CONVERSATION:
            total += _strings(value)
        elif name not in _PROMPT_FIELDS and isinstance(value, Mapping):
            total += sum(_bytes(k) + _bytes(v) for k, v in value.items() if not _control(k))
        else:
            total += _bytes(value)
    return total


# The fields of a body that hold the conversation itself, in each provider's spelling.
_CONVERSATION = frozenset(
    {"messages", "contents", "system", "system_instruction", "systemInstruction", "input",
     "prompt", "instructions"}
)


def _strings(value: Any) -> int:
    """The bytes of every string (and number) in `value`, its keys left out."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Mapping):
        return sum(_strings(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_strings(v) for v in value)
    if value is None or isinstance(value, bool):
        return 0
    return len(str(value))


def _control(name: str) -> bool:
    return name in FREE or name in CAP_KEYS or name in CHOICE_KEYS
