"""The Responses API (`/responses`): a response with output items, or its event stream.

A stream is the events OpenAI sends, in order: `response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`
(one per piece), `response.output_text.done`, `response.content_part.done`,
`response.output_item.done`, and `response.completed` carrying the whole response with its
usage. A stream that never finishes (`NoFinish`) stops before `response.completed`.

Like OpenAI, a model continues only a conversation it holds: a request whose
`previous_response_id` that model did not produce is answered 400
`previous_response_not_found`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from .billing import cap, prompt_tokens, words
from .exchange import Exchange, error_body, reported, split_text
from .steps import Reply, Step, StreamError

__all__ = ["ResponsesExchange"]


class ResponsesExchange(Exchange):
    """An OpenAI Responses API answer: a message item, or function calls."""

    prefix = "resp_fake"
    done = None  # the Responses stream ends with response.completed, not [DONE]

    def play(self, step: Step) -> None:
        previous = self.body.get("previous_response_id")
        if isinstance(previous, str) and not self.h.fake._holds(self.model, previous):
            self.h.send_json(
                400,
                error_body(
                    f"Previous response with id '{previous}' not found.",
                    "invalid_request_error",
                    "previous_response_not_found",
                ),
            )
            return
        super().play(step)

    def _written(self, reply: Reply) -> tuple[str, int, str]:
        limit = cap(self.body, self.limits.max_output, "max_output_tokens")
        text = reply.text
        tokens = words(json.dumps(list(reply.tool_calls))) if reply.tool_calls else words(text)
        status = "completed"
        if limit is not None and tokens > limit:
            text, tokens, status = " ".join(text.split()[:limit]), limit, "incomplete"
        return text, max(tokens, 1), status

    def _usage(self, reply: Reply) -> dict[str, Any]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = prompt_tokens(self.body, ("input", "instructions"))
            completion = self._written(reply)[1]
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }

    def billed(self, reply: Reply) -> int:
        return int(self._usage(reply)["total_tokens"])

    def _items(self, reply: Reply, text: str) -> list[dict[str, Any]]:
        if reply.tool_calls:
            return [
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": tc.get("id", f"call_{i}"),
                    "name": tc["name"],
                    "arguments": json.dumps(tc.get("arguments", {}))
                    if not isinstance(tc.get("arguments"), str)
                    else tc["arguments"],
                    "status": "completed",
                }
                for i, tc in enumerate(reply.tool_calls)
            ]
        return [
            {
                "type": "message",
                "id": "msg_fake",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ]

    def _response(
        self, status: str, output: list[dict[str, Any]], reply: Reply | None
    ) -> dict[str, Any]:
        """The response object; `reply` None while it is in progress (no usage yet)."""
        payload = {
            "id": self.id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": self.body.get("tools") or [],
            "text": {"format": {"type": "text"}},
            "usage": self._usage(reply) if reply is not None else None,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete"
            else None,
        }
        return reported(payload, reply) if reply is not None else payload

    def answer(self, reply: Reply) -> dict[str, Any]:
        self.h.fake._responded(self.model, self.id)
        text, _, status = self._written(reply)
        return self._response(status, self._items(reply, text), reply)

    def failure(self, step: StreamError) -> tuple[str | None, dict[str, Any]]:
        if step.event == "error":
            return "error", {
                "type": "error", "code": step.code, "message": step.message, "param": None,
                "sequence_number": step.after,
            }
        failed = {**self._response("failed", [], None), "error": {"code": step.code, "message": step.message}}
        return step.event, {"type": step.event, "sequence_number": step.after, "response": failed}

    def events(
        self, reply: Reply, pieces: int, finish: bool
    ) -> Iterator[tuple[str | None, dict[str, Any]]]:
        self.h.fake._responded(self.model, self.id)
        text, _, status = self._written(reply)
        sequence = iter(range(10_000))

        def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
            return kind, {"type": kind, "sequence_number": next(sequence), **fields}

        yield event("response.created", response=self._response("in_progress", [], None))
        yield event("response.in_progress", response=self._response("in_progress", [], None))
        items = self._items(reply, text)
        if reply.tool_calls:
            for i, item in enumerate(items):
                yield event(
                    "response.output_item.added", output_index=i, item={**item, "arguments": ""}
                )
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=i,
                    delta=item["arguments"],
                )
                yield event("response.output_item.done", output_index=i, item=item)
        else:
            item = items[0]
            empty = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.output_item.added",
                output_index=0,
                item={**item, "status": "in_progress", "content": []},
            )
            yield event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                part=empty,
            )
            for part in split_text(text, pieces):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=0,
                    content_index=0,
                    delta=part,
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                text=text,
            )
            yield event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                part={**empty, "text": text},
            )
            yield event("response.output_item.done", output_index=0, item=item)
        if finish:
            kind = "response.completed" if status == "completed" else "response.incomplete"
            yield event(kind, response=self._response(status, items, reply))
