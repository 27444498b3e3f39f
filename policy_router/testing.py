"""FakeProvider: a real OpenAI-compatible HTTP server on loopback, with scripted faults.

It is public on purpose: a team can test its own routing configuration against it, over
real HTTP, through LiteLLM's real code path (`openai/<name>` with `api_base`), without a key
or a network. Each model name has a script, a queue of steps consumed one per request; when
the queue is empty the model answers normally. The server counts every request it received
per model, so a test can compare what was really sent with what a journey says.

    with FakeProvider() as fake:
        fake.script("flaky", Fail(503), Reply("second time lucky"))
        Route("openai/flaky", api_base=fake.base_url, api_key="sk-fake")

It is a test double, not a faithful OpenAI: it answers chat completions only, ignores
sampling parameters and does not count tokens (usage is what the step says, or a count of
whitespace-separated words).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "Cut",
    "Drop",
    "Fail",
    "FakeProvider",
    "Hang",
    "NoFinish",
    "Refuse",
    "Reply",
    "Step",
    "Trickle",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer normally: text, or tool calls, with the usage given (else counted in words)."""

    text: str = "Hello from FakeProvider."
    tool_calls: Sequence[dict[str, Any]] = ()
    usage: tuple[int, int] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer with HTTP `status`, an OpenAI-shaped error body, and Retry-After if given."""

    status: int
    message: str = ""
    retry_after: float | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Hang:
    """Say nothing for `seconds` (the connection stays open), then answer like `then`."""

    seconds: float
    then: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Trickle:
    """Answer in `pieces` parts `gap` seconds apart: bytes of the body, or stream chunks."""

    reply: Reply = field(default_factory=Reply)
    pieces: int = 10
    gap: float = 0.4


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the connection without sending a byte back."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Stream `after` chunks, then close the connection with no finish reason and no [DONE].

    A request that did not ask for a stream gets half of its body, then the close.
    """

    after: int = 2
    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class NoFinish:
    """Stream every chunk and `[DONE]`, but never a finish reason: a reply cut short."""

    reply: Reply = field(default_factory=Reply)


@dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the work as OpenAI does: 400 with code `content_policy_violation`."""

    message: str = (
        "Your request was rejected as a result of our safety system. "
        "Your prompt may contain text that is not allowed by our safety system."
    )


Step = Reply | Fail | Hang | Trickle | Drop | Cut | NoFinish | Refuse


class FakeProvider:
    """An OpenAI chat-completions server on 127.0.0.1 with a free port, in a background thread.

    Use it as a context manager (or call `start()` and `stop()`). `base_url` is what a route's
    `api_base` should be. Scripts are per model name (the part after `openai/`), consumed in
    order; `requests(model)` counts the requests received for a model, whatever their fate,
    and `bodies(model)` returns their JSON bodies; `connections()` counts TCP connections. It is thread-safe, so many concurrent
    requests may hit it. It promises nothing about speed beyond what a `Hang` or a
    `Trickle` asks for.
    """

    def __init__(self, *, default: Reply | None = None) -> None:
        self._default = default or Reply()
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[Step]] = defaultdict(deque)
        self._bodies: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._connections = 0
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        """Bind a free loopback port and serve in a daemon thread."""
        if self._server is not None:
            return self
        handler = type("Handler", (_Handler,), {"fake": self})
        server = _Server(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="FakeProvider",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging requests are released at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeProvider is not started; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The `api_base` for routes served by this fake: `http://127.0.0.1:<port>/v1`."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting and counting ------------------------------------------------------------
    def script(self, model: str, *steps: Step) -> None:
        """Queue `steps` for `model`, one per request, after any already queued."""
        with self._lock:
            self._scripts[_bare(model)].extend(steps)

    def requests(self, model: str | None = None) -> int:
        """How many requests arrived for `model` (the bare name), or for all models."""
        with self._lock:
            if model is None:
                return sum(len(v) for v in self._bodies.values())
            return len(self._bodies.get(_bare(model), ()))

    def connections(self) -> int:
        """How many TCP connections were opened to it: with keep-alive, far fewer than
        requests; one per request means the client builds a new connection each time."""
        with self._lock:
            return self._connections

    def bodies(self, model: str) -> list[dict[str, Any]]:
        """The JSON bodies received for `model`, oldest first."""
        with self._lock:
            return list(self._bodies.get(_bare(model), ()))

    def reset(self) -> None:
        """Forget every script and count."""
        with self._lock:
            self._scripts.clear()
            self._bodies.clear()
            self._connections = 0

    def _take(self, model: str, body: dict[str, Any]) -> Step:
        with self._lock:
            self._bodies[model].append(body)
            queue = self._scripts.get(model)
            return queue.popleft() if queue else self._default

    def _sleep(self, seconds: float) -> bool:
        """Wait, but wake at shutdown; True when the server is stopping."""
        return self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    # The standard backlog of 5 drops connections when hundreds of calls arrive at once;
    # the clients then retransmit their SYN after 1, 3, 7, 15 s..., which reads as a hang.
    request_queue_size = 1024


def _bare(model: str) -> str:
    return model.split("/", 1)[1] if model.startswith("openai/") else model


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProvider
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the body then
    # waits for the client's delayed ACK, adding ~40 ms to every sync call (seen here).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: a test's output is not the place for an access log."""

    def setup(self) -> None:
        super().setup()
        with self.fake._lock:
            self.fake._connections += 1

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, _error("request body is not JSON", "invalid_request_error"))
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error(f"no route {self.path}", "not_found"))
            return
        model = str(body.get("model", ""))
        step = self.fake._take(model, body)
        stream = bool(body.get("stream"))
        usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
        _Exchange(self, model, body, stream, usage_wanted).play(step)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": []})
        else:
            self._send_json(404, _error(f"no route {self.path}", "not_found"))

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
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


class _Exchange:
    """One request's answer, played from a step."""

    def __init__(
        self, handler: _Handler, model: str, body: dict[str, Any], stream: bool, usage: bool
    ) -> None:
        self.h = handler
        self.model = model
        self.body = body
        self.stream = stream
        self.usage_wanted = usage
        self.id = f"chatcmpl-fake-{time.monotonic_ns()}"

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
            self.h._send_json(step.status, _error(step.message or text, kind, step.code), headers)
        elif isinstance(step, Refuse):
            self.h._send_json(
                400, _error(step.message, "invalid_request_error", "content_policy_violation")
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

    def _drop(self) -> None:
        self.h.close_connection = True
        with contextlib.suppress(OSError):
            self.h.connection.shutdown(socket.SHUT_RDWR)

    # -- answers -------------------------------------------------------------------------
    def _usage(self, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            words = sum(
                len(str(m.get("content", "")).split()) for m in self.body.get("messages", [])
            )
            prompt, completion = max(words, 1), max(len(reply.text.split()), 1)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _finish(self, reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _reply(
        self,
        reply: Reply,
        *,
        pieces: int = 1,
        gap: float = 0.0,
        cut_after: int | None = None,
        finish: bool = True,
    ) -> None:
        if self.stream:
            self._stream(reply, pieces=pieces, gap=gap, cut_after=cut_after, finish=finish)
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [_tool_call(i, tc) for i, tc in enumerate(reply.tool_calls)]
        payload = {
            "id": self.id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": self._usage(reply),
        }
        data = json.dumps(payload).encode()
        self.h.send_response(200)
        self.h.send_header("Content-Type", "application/json")
        self.h.send_header("Content-Length", str(len(data)))
        self.h.end_headers()
        if cut_after is not None:
            self.h.wfile.write(data[: len(data) // 2])
            self.h.wfile.flush()
            self._drop()
            return
        for part in _split(data, pieces):
            self.h.wfile.write(part)
            self.h.wfile.flush()
            if pieces > 1 and self.h.fake._sleep(gap):
                self._drop()
                return

    def _stream(
        self, reply: Reply, *, pieces: int, gap: float, cut_after: int | None, finish: bool
    ) -> None:
        self.h.close_connection = True
        self.h.send_response(200)
        self.h.send_header("Content-Type", "text/event-stream")
        self.h.send_header("Cache-Control", "no-cache")
        self.h.send_header("Connection", "close")
        self.h.end_headers()
        chunks = list(self._chunks(reply, max(pieces, 1), finish))
        for i, chunk in enumerate(chunks):
            if cut_after is not None and i >= cut_after:
                self._drop()
                return
            self.h.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.h.wfile.flush()
            if gap and i < len(chunks) - 1 and self.h.fake._sleep(gap):
                self._drop()
                return
        if cut_after is not None:
            self._drop()
            return
        self.h.wfile.write(b"data: [DONE]\n\n")
        self.h.wfile.flush()

    def _chunks(self, reply: Reply, pieces: int, finish: bool) -> Iterator[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        yield chunk({"role": "assistant", "content": ""})
        if reply.tool_calls:
            for i, tc in enumerate(reply.tool_calls):
                yield chunk({"tool_calls": [{"index": i, **_tool_call(i, tc)}]})
        else:
            for part in _split_text(reply.text, pieces):
                yield chunk({"content": part})
        yield chunk({}, self._finish(reply) if finish else None)
        if self.usage_wanted:
            last = chunk({})
            last["choices"] = []
            last["usage"] = self._usage(reply)
            yield last


def _tool_call(i: int, tc: dict[str, Any]) -> dict[str, Any]:
    args = tc.get("arguments", {})
    return {
        "id": tc.get("id", f"call_{i}"),
        "type": "function",
        "function": {
            "name": tc["name"],
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


def _split(data: bytes, pieces: int) -> list[bytes]:
    if pieces <= 1:
        return [data]
    size = max(1, -(-len(data) // pieces))
    return [data[i : i + size] for i in range(0, len(data), size)]


def _split_text(text: str, pieces: int) -> list[str]:
    words = text.split(" ")
    if pieces <= 1 or len(words) <= 1:
        # Even an unsplit reply streams word by word, like a real provider.
        return [w if i == 0 else " " + w for i, w in enumerate(words)]
    size = max(1, -(-len(words) // pieces))
    groups = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    return [g if i == 0 else " " + g for i, g in enumerate(groups)]
