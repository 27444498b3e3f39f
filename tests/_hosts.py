"""Test hosts off loopback: an address of this machine that is not 127.0.0.0/8, where a
test can run a "vendor" or a proxy that the on-device floor must never reach, and a
recording HTTP proxy to put there.

The address is found without the network: the kernel names the source address it would
use for a route (a UDP socket's `connect` sends nothing), else `ip -4 addr` lists one.
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RecordingProxy", "outside_address"]


def outside_address() -> str:
    """An IPv4 address of this machine that is not loopback. Fails loudly when there is
    none: a test of what leaves the machine cannot be run without one."""
    for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))  # no packet is sent: the kernel only picks a route
            address = s.getsockname()[0]
            if not ipaddress.ip_address(address).is_loopback:
                return str(address)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        listed = subprocess.run(
            ["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
        for line in listed.splitlines():
            parts = line.split()
            if "inet" in parts:
                address = parts[parts.index("inet") + 1].split("/")[0]
                if not ipaddress.ip_address(address).is_loopback:
                    return address
    raise RuntimeError("this machine has no address off loopback to play a vendor on")


class RecordingProxy:
    """An HTTP proxy (absolute-URI requests and CONNECT tunnels) that records every
    connection and request it gets and forwards each to its target, as a corporate proxy
    would: a request that reaches it has left the machine."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.connections = 0
        self.requests: list[tuple[str, str, bytes]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy.connections += 1

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy.requests.append((self.command, self.path, body))
                parts = urlsplit(self.path)
                try:
                    upstream = socket.create_connection((parts.hostname, parts.port or 80), timeout=5)
                except OSError:
                    self.send_error(502)
                    return
                with upstream:
                    path = parts.path + (f"?{parts.query}" if parts.query else "")
                    head = [f"{self.command} {path or '/'} HTTP/1.1"]
                    head += [f"{k}: {v}" for k, v in self.headers.items() if k.lower() != "proxy-connection"]
                    upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
                    self.close_connection = True
                    _pipe(upstream, self.connection)

            do_GET = do_POST = _forward

            def do_CONNECT(self) -> None:
                with proxy._lock:
                    proxy.requests.append(("CONNECT", self.path, b""))
                host, _, port = self.path.partition(":")
                try:
                    upstream = socket.create_connection((host, int(port or 443)), timeout=5)
                except OSError:
                    self.send_error(502)
                    return
                self.send_response(200, "Connection Established")
                self.end_headers()
                with upstream:
                    self.close_connection = True
                    _pipe(upstream, self.connection, both=True)

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._server.server_address[1]}"

    def reset(self) -> None:
        with self._lock:
            self.connections = 0
            self.requests.clear()

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _pipe(upstream: socket.socket, client: socket.socket, *, both: bool = False) -> None:
    """Copy bytes until either side closes (both ways for a tunnel)."""
    pairs = {upstream: client, client: upstream} if both else {upstream: client}
    sockets = list(pairs)
    while True:
        ready, _, _ = select.select(sockets, [], [], 10)
        if not ready:
            return
        for s in ready:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if not data:
                return
            with contextlib.suppress(OSError):
                pairs[s].sendall(data)
