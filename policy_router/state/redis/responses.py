"""Which route made each response, in Redis, so every process continues a conversation
on the route that started it (see `policies.continuity`).

One key per response, `<key prefix>:made:<response id>` = "<on_device 0|1>:<route id>", that
expires when the provider forgets the response. A write Redis could not take is kept and
written when it answers again, and this process's own view has it meanwhile; a read Redis
cannot answer raises `StoreUnavailableError`, which continuity treats as "on the device".
"""

from __future__ import annotations

from typing import Any

from ..memory import InMemoryStore
from .keyspace import KeySpace
from .link import Link

__all__ = ["RememberedResponses"]


class RememberedResponses:
    """Which route made each response, under `keys` on `link`, with `local` (the store's
    own view in this process) kept beside it."""

    __slots__ = ("_link", "_local", "_space")

    def __init__(self, keys: KeySpace, link: Link, local: InMemoryStore) -> None:
        self._space = keys.space
        self._link = link
        self._local = local

    def made_write(self, response: str, route: str, on_device: bool, seconds: float) -> Any:
        value = f"{int(on_device)}:{route}"
        return [("set", (f"{self._space}:made:{response}", value, max(int(seconds), 1)))]

    def remember_response(self, response: str, route: str, on_device: bool, seconds: float) -> None:
        self._local.remember_response(response, route, on_device, seconds)
        self._link.write(self.made_write(response, route, on_device, seconds))

    async def aremember_response(
        self, response: str, route: str, on_device: bool, seconds: float
    ) -> None:
        self._local.remember_response(response, route, on_device, seconds)
        await self._link.awrite(self.made_write(response, route, on_device, seconds))

    def _decoded(self, response: str, value: Any) -> tuple[str, bool] | None:
        if isinstance(value, str) and ":" in value:
            flag, route = value.split(":", 1)
            return route, flag == "1"
        # Not in Redis (written while it was down, or expired there): this process may know.
        return self._local.recall_response(response)

    def recall_response(self, response: str) -> tuple[str, bool] | None:
        key = f"{self._space}:made:{response}"
        return self._decoded(response, self._link.run(lambda r: r.get(key)))

    async def arecall_response(self, response: str) -> tuple[str, bool] | None:
        key = f"{self._space}:made:{response}"
        return self._decoded(response, await self._link.arun(lambda r: r.get(key)))
