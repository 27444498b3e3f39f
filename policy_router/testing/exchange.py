"""How a step is played on the wire: one request's answer, its failures, hangs, trickles,
drops and cut streams, written once for every endpoint.

Each endpoint (`chat.py`, ...) subclasses `Exchange` to say only what its answers look like.
The HTTP handler that plays an exchange is seen through `Handler`, so that this module
knows nothing of the server that routes requests to it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from .steps import (
    Cut,
    Drop,
    Fail,
    Hang,
    Malformed,
    NoDone,
    NoFinish,
    Refuse,
    Reply,
    Stall,
    Step,
    StreamError,
    Trickle,
)

__all__ = ["Exchange", "Handler", "Limits", "error_body", "reported", "split_text"]


class Handler(Protocol):
    """What an exchange uses of the HTTP handler playing it."""

    @property
    def fake(self) -> Any: ...  # the FakeProvider it serves

    connection: Any
    wfile: Any
    close_connection: bool

    def send_response(self, code: int, message: str | None = None) -> None: ...

    def send_header(self, keyword: str, value: str) -> None: ...

    def end_headers(self) -> None: ...

    def send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Limits:
    """What one model of the fake enforces: the most tokens it writes per reply, and the
    requests and tokens it takes a minute before answering 429 with the real wait."""

    max_output: int | None = None
    rpm: int | None = None
    tpm: int | None = None



def reported(payload: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """`payload` with its `usage` as `reply.report_usage` says: kept, left out, or null."""
    if reply.report_usage == "missing":
        payload.pop("usage", None)
    elif reply.report_usage == "null":
        payload["usage"] = None
    return payload


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}



_STATUS_TEXT = {
    400: ("Invalid request.", "invalid_request_error"),
    401: ("Incorrect API key provided.", "invalid_request_error"),
    403: ("You are not allowed to use this model.", "permission_error"),
    404: ("The model does not exist or you do not have access to it.", "not_found_error"),
    422: ("Unprocessable entity.", "invalid_request_error"),
    429: ("Too many requests, please slow down.", "requests"),
    500: ("The server had an error while processing your request.", "server_error"),
    502: ("Bad gateway.", "server_error"),
    503: ("The engine is currently overloaded, please try again later.", "server_error"),
}



class Exchange:
    """One request's answer, played from a step. An endpoint subclass says what a whole
    answer is (`answer`) and which events stream it (`events`); the rest is shared.

    `events` yields (event name or None, payload) for each server-sent event, in order; with
    `finish=False` the stream never says it finished. `done` is the stream's closing line,
    if the endpoint has one (chat's `data: [DONE]`).
    """

    prefix: ClassVar[str] = "fake"
    done: ClassVar[bytes | None] = b"data: [DONE]\n\n"

    def __init__(self, handler: Handler, model: str, body: dict[str, Any], limits: Limits) -> None:
        self.h = handler
        self.model = model
        self.body = body
        self.limits = limits
        self.stream = bool(body.get("stream"))
        self.id = f"{self.prefix}-{time.monotonic_ns()}"
        self.place: list[float] | None = None  # in the model's rate window, when limited
        self.epoch = handler.fake.epoch  # the fake's resets when the request arrived

    # -- what an endpoint says -------------------------------------------------------------
    def answer(self, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def billed(self, reply: Reply) -> int:
        """Every token the reply bills, prompt and output."""
        raise NotImplementedError

    def events(
        self, reply: Reply, pieces: int, finish: bool
    ) -> Iterator[tuple[str | None, dict[str, Any]]]:
        raise NotImplementedError

    def failure(self, step: StreamError) -> tuple[str | None, dict[str, Any]]:
        """The event that says, in a stream, that the answer failed."""
        return None, error_body(step.message, step.code, step.code)

    # -- playing a step --------------------------------------------------------------------
    def play(self, step: Step) -> None:
        try:
            self._play(step)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a deadline, a cancelled task): nothing to answer.
            self.h.close_connection = True

    def _play(self, step: Step) -> None:
        if isinstance(step, Reply):
            self._reply(step)
        elif isinstance(step, Fail):
            text, kind = _STATUS_TEXT.get(step.status, (f"Error {step.status}.", "error"))
            headers = {}
            if step.retry_after is not None:
                headers["Retry-After"] = f"{step.retry_after:g}"
            self.h.send_json(
                step.status, error_body(step.message or text, kind, step.code), headers
            )
        elif isinstance(step, Refuse):
            self.h.send_json(
                400, error_body(step.message, "invalid_request_error", "content_policy_violation")
            )
        elif isinstance(step, Hang):
            if not self.h.fake._sleep(step.seconds):
                self._reply(step.then)
            else:
                self._drop()
        elif isinstance(step, Trickle):
            self._reply(step.reply, pieces=step.pieces, gap=step.gap)
        elif isinstance(step, Drop):
            self._drop()
        elif isinstance(step, Cut):
            self._reply(step.reply, cut_after=step.after)
        elif isinstance(step, NoFinish):
            self._reply(step.reply, finish=False)
        elif isinstance(step, StreamError):
            self._reply(step.reply, cut_after=step.after, failure=step)
        elif isinstance(step, Stall):
            self._reply(step.reply, stall=(step.after, step.seconds))
        elif isinstance(step, Malformed):
            self._reply(step.reply, garbage=(step.after, step.data))
        elif isinstance(step, NoDone):
            self._reply(step.reply, done=False)

    def _drop(self) -> None:
        self.h.close_connection = True
        with contextlib.suppress(OSError):
            self.h.connection.shutdown(socket.SHUT_RDWR)

    def _reply(
        self,
        reply: Reply,
        *,
        pieces: int = 1,
        gap: float = 0.0,
        cut_after: int | None = None,
        finish: bool = True,
        failure: StreamError | None = None,
        stall: tuple[int, float] | None = None,
        garbage: tuple[int, str] | None = None,
        done: bool = True,
    ) -> None:
        self.h.fake._billed(self.place, self.billed(reply))
        self.h.fake._bill(self.model, self.billed(reply), self.epoch)
        if self.stream:
            self._stream(
                reply, pieces=pieces, gap=gap, cut_after=cut_after, finish=finish, failure=failure,
                stall=stall, garbage=garbage, done=done,
            )
            return
        data = json.dumps(self.answer(reply)).encode()
        self.h.send_response(200)
        self.h.send_header("Content-Type", "application/json")
        self.h.send_header("Content-Length", str(len(data)))
        self.h.end_headers()
        if cut_after is not None:
            self.h.wfile.write(data[: len(data) // 2])
            self.h.wfile.flush()
            self._drop()
            return
        if stall is not None:
            self.h.wfile.write(data[: len(data) // 2])
            self.h.wfile.flush()
            if self.h.fake._sleep(stall[1]):
                self._drop()
                return
            self.h.wfile.write(data[len(data) // 2 :])
            self.h.wfile.flush()
            return
        for part in _split(data, pieces):
            self.h.wfile.write(part)
            self.h.wfile.flush()
            if pieces > 1 and self.h.fake._sleep(gap):
                self._drop()
                return

    def _stream(
        self,
        reply: Reply,
        *,
        pieces: int,
        gap: float,
        cut_after: int | None,
        finish: bool,
        failure: StreamError | None = None,
        stall: tuple[int, float] | None = None,
        garbage: tuple[int, str] | None = None,
        done: bool = True,
    ) -> None:
        self.h.close_connection = True
        self.h.send_response(200)
        self.h.send_header("Content-Type", "text/event-stream")
        self.h.send_header("Cache-Control", "no-cache")
        self.h.send_header("Connection", "close")
        self.h.end_headers()
        events = list(self.events(reply, max(pieces, 1), finish))
        for i, (name, payload) in enumerate(events):
            if stall is not None and i == stall[0] and self.h.fake._sleep(stall[1]):
                self._drop()
                return
            if garbage is not None and i == garbage[0]:
                self.h.wfile.write(b"data: " + garbage[1].encode() + b"\n\n")
                self.h.wfile.flush()
            if cut_after is not None and i >= cut_after:
                if failure is not None:
                    name, payload = self.failure(failure)
                    head = f"event: {name}\n".encode() if name else b""
                    self.h.wfile.write(head + b"data: " + json.dumps(payload).encode() + b"\n\n")
                    self.h.wfile.flush()
                self._drop()
                return
            head = f"event: {name}\n".encode() if name else b""
            self.h.wfile.write(head + b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.h.wfile.flush()
            if gap and i < len(events) - 1 and self.h.fake._sleep(gap):
                self._drop()
                return
        if cut_after is not None:
            self._drop()
            return
        if self.done and done:
            self.h.wfile.write(self.done)
            self.h.wfile.flush()



def _split(data: bytes, pieces: int) -> list[bytes]:
    if pieces <= 1:
        return [data]
    size = max(1, -(-len(data) // pieces))
    return [data[i : i + size] for i in range(0, len(data), size)]



def split_text(text: str, pieces: int) -> list[str]:
    """The text in about `pieces` parts of whole words (word by word when `pieces` is 1)."""
    words = text.split(" ")
    if pieces <= 1 or len(words) <= 1:
        # Even an unsplit reply streams word by word, like a real provider.
        return [w if i == 0 else " " + w for i, w in enumerate(words)]
    size = max(1, -(-len(words) // pieces))
    groups = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    return [g if i == 0 else " " + g for i, g in enumerate(groups)]
