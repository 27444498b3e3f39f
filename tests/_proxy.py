"""A TCP proxy on loopback that loses, delays or withholds a server's replies.

It sits between a client and a real server (Redis here) and fails the way networks do:
`lose(marker, times)` lets the server run a command whose bytes contain `marker`, then
drops its reply and closes the client's connection, `times` times; `delay(seconds)` holds
every reply back; `hang()` stops forwarding anything until `heal()`. Counts of what it did
let a test check the fault really happened.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field

from ._redis import free_port


@dataclass
class _Rules:
    lose: dict[bytes, int] = field(default_factory=dict)
    delay: float = 0.0
    hung: bool = False
    lost: int = 0


class FaultProxy:
    """Listens on a free loopback port and forwards to `127.0.0.1:target`."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._rules = _Rules()
        self._lock = threading.Lock()
        self._moving = threading.Condition(self._lock)
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="FaultProxy").start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    # -- faults ----------------------------------------------------------------------------
    def lose(self, marker: bytes, times: int = 1) -> None:
        """Let the next `times` commands containing `marker` run, and lose their replies."""
        with self._lock:
            self._rules.lose[marker] = self._rules.lose.get(marker, 0) + times

    def delay(self, seconds: float) -> None:
        with self._lock:
            self._rules.delay = seconds

    def hang(self) -> None:
        """Forward nothing either way until `heal()`: a server that stopped answering."""
        with self._lock:
            self._rules.hung = True

    def heal(self) -> None:
        with self._moving:
            self._rules = _Rules(lost=self._rules.lost)
            self._moving.notify_all()

    @property
    def lost(self) -> int:
        """How many replies were lost so far."""
        with self._lock:
            return self._rules.lost

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._listener.close()
        for s in list(self._sockets):
            with contextlib.suppress(OSError):
                s.close()
        self.heal()

    # -- pumping ---------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()  # the server is down: so is the proxy, to the client
                continue
            self._sockets += [client, server]
            doomed = threading.Event()
            threading.Thread(target=self._up, args=(client, server, doomed), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, doomed), daemon=True).start()

    def _wait_while_hung(self) -> None:
        with self._moving:
            while self._rules.hung and not self._closing:
                self._moving.wait(0.05)

    def _up(self, client: socket.socket, server: socket.socket, doomed: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                self._wait_while_hung()
                with self._lock:
                    for marker, left in list(self._rules.lose.items()):
                        if left > 0 and marker in data:
                            self._rules.lose[marker] = left - 1
                            doomed.set()
                            break
                server.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_WR)

    def _down(self, server: socket.socket, client: socket.socket, doomed: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if doomed.is_set():
                    # The server ran the command; its answer never reaches the client.
                    with self._lock:
                        self._rules.lost += 1
                    break
                self._wait_while_hung()
                with self._lock:
                    delay = self._rules.delay
                if delay:
                    time.sleep(delay)
                client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
