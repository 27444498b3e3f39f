"""Legacy text completions (`/completions`): `n` (and `best_of`) choices of the reply."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .billing import cap, prompt_tokens, stop_at, words
from .exchange import Exchange, reported, split_text
from .steps import Reply

__all__ = ["CompletionExchange"]


class CompletionExchange(Exchange):
    """An OpenAI text completion; every one of `max(n, best_of)` choices is billed."""

    prefix = "cmpl-fake"

    def _billed_choices(self) -> tuple[int, int]:
        raw_n, raw_best = self.body.get("n"), self.body.get("best_of")
        n = raw_n if isinstance(raw_n, int) else 1
        best_of = raw_best if isinstance(raw_best, int) else n
        return max(n, 1), max(n, best_of, 1)

    def _written(self, reply: Reply) -> tuple[str, int, str]:
        limit = cap(self.body, self.limits.max_output, "max_tokens")
        return stop_at(reply.text, words(reply.text), reply.finish_reason or "stop", limit)

    def usage(self, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = prompt_tokens(self.body, ("prompt",))
            # A list of texts (or of token-id lists) is a batch: each prompt gets its replies.
            raw = self.body.get("prompt")
            batch = len(raw) if isinstance(raw, list) and raw and not all(
                isinstance(p, int) for p in raw
            ) else 1
            completion = batch * self._billed_choices()[1] * self._written(reply)[1]
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _payload(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
        }

    def billed(self, reply: Reply) -> int:
        return self.usage(reply)["total_tokens"]

    def answer(self, reply: Reply) -> dict[str, Any]:
        text, _, finish = self._written(reply)
        shown, _ = self._billed_choices()
        payload = self._payload(
            [
                {"text": text, "index": i, "logprobs": None, "finish_reason": finish}
                for i in range(shown)
            ]
        )
        payload["usage"] = self.usage(reply)
        return reported(payload, reply)

    def events(
        self, reply: Reply, pieces: int, finish: bool
    ) -> Iterator[tuple[str | None, dict[str, Any]]]:
        text, _, reason = self._written(reply)
        shown, _ = self._billed_choices()
        for index in range(shown):
            for part in split_text(text, pieces):
                yield (
                    None,
                    self._payload(
                        [{"text": part, "index": index, "logprobs": None, "finish_reason": None}]
                    ),
                )
            yield (
                None,
                self._payload(
                    [
                        {
                            "text": "",
                            "index": index,
                            "logprobs": None,
                            "finish_reason": reason if finish else None,
                        }
                    ]
                ),
            )
        if (self.body.get("stream_options") or {}).get("include_usage") and (
            reply.report_usage != "missing"
        ):
            last = self._payload([])
            last["usage"] = self.usage(reply)
            yield None, reported(last, reply)
