"""The FakeProvider server: scripts, counts and limits per model, and the HTTP handler
that hands each request to its endpoint's `Exchange` (see `exchange.py`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar

from .endpoints import EXCHANGES
from .exchange import Limits, error_body
from .steps import Fail, Reply, Step

__all__ = ["FakeProvider"]


class FakeProvider:
    """An OpenAI-compatible server on 127.0.0.1 with a free port, in a background thread.

    Use it as a context manager (or call `start()` and `stop()`). `base_url` is what a route's
    `api_base` should be. Scripts are per model name (the part after `openai/`), consumed in
    order; `requests(model)` counts the requests received for a model, whatever their fate,
    `bodies(model)` returns their JSON bodies, `bills(model)` what it billed for each reply
    it wrote (reported in the answer or not); `connections()` counts TCP connections.
    `limits(model, max_output=...)` makes a model stop writing where a real one would. It is
    thread-safe, so many concurrent requests may hit it. It promises nothing about speed
    beyond what a `Hang` or a `Trickle` asks for.

    A reply bills honestly when its step gives no usage (see `billing.py`): one token a word
    of everything the request sends, and of every choice of the reply it sends back.
    """

    def __init__(
        self,
        *,
        default: Reply | None = None,
        responder: Callable[[str, dict[str, Any]], Step | None] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """`default` answers a request no script is queued for, unless `responder` (given
        the request's path and body) returns a step first: see `Cooperative`. `host` is the
        address it listens on: loopback, or (to play a vendor in a test of what leaves the
        machine) one of this machine's other addresses."""
        self._host = host
        self._default = default or Reply()
        self._responder = responder
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[Step]] = defaultdict(deque)
        self._bodies: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._limits: dict[str, Limits] = {}
        # Per model: [when, tokens] for each request in the last 60 s; tokens are the
        # request's bound until its reply is written, then what the reply billed.
        self._windows: dict[str, deque[list[float]]] = defaultdict(deque)
        self._refused: dict[str, int] = defaultdict(int)
        # Per model, the ids of the Responses answers it gave: only it can continue one.
        self._made: dict[str, set[str]] = defaultdict(set)
        self._connections = 0
        self._strays = 0  # requests received for no endpoint it serves (or not JSON)
        self._bills: dict[str, list[int]] = defaultdict(list)
        self.epoch = 0  # counts resets: a reply to a request from before one bills nothing after
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        """Bind a free loopback port and serve in a daemon thread."""
        if self._server is not None:
            return self
        handler = type("Handler", (_Handler,), {"fake": self})
        server = _Server((self._host, 0), handler)
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
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting and counting ------------------------------------------------------------
    @property
    def responder(self) -> Callable[[str, dict[str, Any]], Step | None] | None:
        """What answers a request no script is queued for (see `__init__`); settable, so a
        running server plays a new scenario (`reset()` keeps it: set None to clear it)."""
        return self._responder

    @responder.setter
    def responder(self, responder: Callable[[str, dict[str, Any]], Step | None] | None) -> None:
        self._responder = responder

    def script(self, model: str, *steps: Step) -> None:
        """Queue `steps` for `model`, one per request, after any already queued."""
        with self._lock:
            self._scripts[_bare(model)].extend(steps)

    def limits(
        self,
        model: str,
        *,
        max_output: int | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> None:
        """Make `model` write at most `max_output` tokens per reply (finish reason
        "length"), as a real model stops at its own limit; and take at most `rpm` requests
        and `tpm` tokens in any 60 seconds, as a provider account does (a request counts its
        prompt plus the reply cap it sends until its reply is written, then what it billed): past them it answers 429 with `Retry-After` set to when the
        window has room, and counts the refusal (`refused(model)`)."""
        with self._lock:
            self._limits[_bare(model)] = Limits(max_output, rpm, tpm)

    def refused(self, model: str | None = None) -> int:
        """How many requests for `model` (or for all) its rate limits refused with a 429."""
        with self._lock:
            if model is None:
                return sum(self._refused.values())
            return self._refused.get(_bare(model), 0)

    def requests(self, model: str | None = None) -> int:
        """How many requests arrived for `model` (the bare name), or in all: every request
        that reached the server, those it answered 404 or 400 (an unknown path, a body that
        is not JSON) included, since they too left the caller's process."""
        with self._lock:
            if model is None:
                return sum(len(v) for v in self._bodies.values()) + self._strays
            return len(self._bodies.get(_bare(model), ()))

    def connections(self) -> int:
        """How many TCP connections were opened to it: with keep-alive, far fewer than
        requests; one per request means the client builds a new connection each time."""
        with self._lock:
            return self._connections

    def bills(self, model: str | None = None) -> list[int]:
        """The tokens it billed each reply it wrote for `model` (or for all), prompt and
        output, oldest first: what a provider charges, whether or not the answer reported
        its usage, and whether or not the client was still there to read it."""
        with self._lock:
            if model is None:
                return [t for v in self._bills.values() for t in v]
            return list(self._bills.get(_bare(model), ()))

    def _bill(self, model: str, tokens: int, epoch: int) -> None:
        with self._lock:
            if epoch == self.epoch:  # else the request arrived before a reset: not counted
                self._bills[_bare(model)].append(tokens)

    def bodies(self, model: str) -> list[dict[str, Any]]:
        """The JSON bodies received for `model`, oldest first."""
        with self._lock:
            return list(self._bodies.get(_bare(model), ()))

    def _responded(self, model: str, response: str) -> None:
        with self._lock:
            self._made[_bare(model)].add(response)

    def _holds(self, model: str, response: str) -> bool:
        with self._lock:
            return response in self._made.get(_bare(model), ())

    def reset(self) -> None:
        """Forget every script, count and limit. A request that arrived before the reset
        and is still being answered (a hang, a trickle) bills nothing after it: its bill
        is the earlier test's, and would otherwise land in a later one's count."""
        with self._lock:
            self.epoch += 1
            self._scripts.clear()
            self._bodies.clear()
            self._limits.clear()
            self._windows.clear()
            self._refused.clear()
            self._made.clear()
            self._bills.clear()
            self._connections = 0
            self._strays = 0

    def _over(
        self, model: str, limits: Limits, body: dict[str, Any]
    ) -> tuple[Fail | None, list[float] | None]:
        """A 429 when the request does not fit the model's window, else its place in it."""
        if limits.rpm is None and limits.tpm is None:
            return None, None
        from .billing import cap, choices, prompt_tokens

        now = time.monotonic()
        window = self._windows[model]
        while window and window[0][0] <= now - 60.0:
            window.popleft()
        # As a provider counts on arrival: the reply cap the request sends, not the model's.
        reply = cap(body, None, "max_tokens", "max_completion_tokens", "max_output_tokens")
        texts = ("messages", "input", "instructions", "prompt")
        tokens = prompt_tokens(body, texts) + (reply or 0) * choices(body)
        used = sum(t for _, t in window)
        if (limits.rpm is not None and len(window) >= limits.rpm) or (
            limits.tpm is not None and used + tokens > limits.tpm
        ):
            self._refused[model] += 1
            wait = window[0][0] + 60.0 - now if window else 60.0
            refusal = Fail(
                429, "Rate limit reached for requests", retry_after=round(max(wait, 0.1), 1)
            )
            return refusal, None
        place = [now, float(tokens)]
        window.append(place)
        return None, place

    def _billed(self, place: list[float] | None, tokens: int) -> None:
        """A reply was written: its place in the window counts what it billed."""
        if place is not None:
            with self._lock:
                place[1] = float(tokens)

    def _take(
        self, model: str, path: str, body: dict[str, Any]
    ) -> tuple[Step, Limits, list[float] | None]:
        with self._lock:
            self._bodies[model].append(body)
            limits = self._limits.get(model, Limits())
            refusal, place = self._over(model, limits, body)
            if refusal is not None:
                return refusal, limits, None
            queue = self._scripts.get(model)
            step = queue.popleft() if queue else None
        if step is None and self._responder is not None:
            step = self._responder(path, body)
        return step or self._default, limits, place

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
    fake: ClassVar[FakeProvider]  # the fake this handler class was made for (`start`)
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

    def _stray(self) -> None:
        with self.fake._lock:
            self.fake._strays += 1

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._stray()
            self.send_json(400, error_body("request body is not JSON", "invalid_request_error"))
            return
        path = self.path.rstrip("/")
        exchange = next((e for p, e in EXCHANGES.items() if path.endswith(p)), None)
        if exchange is None:
            self._stray()
            self.send_json(404, error_body(f"no route {self.path}", "not_found"))
            return
        model = str(body.get("model", ""))
        step, limits, place = self.fake._take(model, path, body)
        answer = exchange(self, model, body, limits)
        answer.place = place
        answer.play(step)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": []})
        else:
            self.send_json(404, error_body(f"no route {self.path}", "not_found"))

    def send_json(
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


