"""Chat completions (`/chat/completions`): whole answers and streamed chunks, `n` choices."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from .billing import cap, prompt_tokens, stop_at, words
from .exchange import Exchange, reported, split_text
from .steps import Reply

__all__ = ["ChatExchange"]


def tool_call(i: int, tc: dict[str, Any]) -> dict[str, Any]:
    """A scripted tool call ({"name", "arguments", "id"?}) in OpenAI's wire shape."""
    args = tc.get("arguments", {})
    return {
        "id": tc.get("id", f"call_{i}"),
        "type": "function",
        "function": {
            "name": tc["name"],
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


class ChatExchange(Exchange):
    """An OpenAI chat completion: `n` choices of the reply, each cut at the reply cap."""

    prefix = "chatcmpl-fake"

    def _choices(self) -> int:
        n = self.body.get("n")
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1

    def _written(self, reply: Reply) -> tuple[str, int, str]:
        """The text one choice sends, its tokens, and its finish reason."""
        limit = cap(self.body, self.limits.max_output, "max_tokens", "max_completion_tokens")
        text = reply.text
        if reply.tool_calls:
            tokens = words(json.dumps(list(reply.tool_calls)))
            finish = reply.finish_reason or "tool_calls"
        else:
            tokens = words(text)
            finish = reply.finish_reason or "stop"
        return stop_at(text, tokens, finish, limit)

    def usage(self, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = prompt_tokens(self.body)
            completion = self._choices() * self._written(reply)[1]
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def billed(self, reply: Reply) -> int:
        return self.usage(reply)["total_tokens"]

    def answer(self, reply: Reply) -> dict[str, Any]:
        text, _, finish = self._written(reply)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if reply.tool_calls:
            message["tool_calls"] = [tool_call(i, tc) for i, tc in enumerate(reply.tool_calls)]
        return reported(
            {
                "id": self.id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model,
                "choices": [
                    {"index": i, "message": message, "finish_reason": finish}
                    for i in range(self._choices() if reply.choices is None else reply.choices)
                ],
                "usage": self.usage(reply),
            },
            reply,
        )

    def events(
        self, reply: Reply, pieces: int, finish: bool
    ) -> Iterator[tuple[str | None, dict[str, Any]]]:
        text, _, reason = self._written(reply)

        def chunk(index: int, delta: dict[str, Any], reason: str | None = None) -> Any:
            return None, {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": index, "delta": delta, "finish_reason": reason}],
            }

        for index in range(self._choices()):
            yield chunk(index, {"role": "assistant", "content": ""})
            if reply.tool_calls:
                for i, tc in enumerate(reply.tool_calls):
                    yield chunk(index, {"tool_calls": [{"index": i, **tool_call(i, tc)}]})
            else:
                for part in split_text(text, pieces):
                    yield chunk(index, {"content": part})
            yield chunk(index, {}, reason if finish else None)
        if (self.body.get("stream_options") or {}).get("include_usage") and (
            reply.report_usage != "missing"
        ):
            _, last = chunk(0, {})
            last["choices"] = []
            last["usage"] = self.usage(reply)
            yield None, reported(last, reply)
