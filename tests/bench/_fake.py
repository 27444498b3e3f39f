"""Run FakeProvider in a child process, so its CPU time is not counted as the caller's;
and the three priced routes on it that the benchmarks share."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any


def _serve(conn: Connection) -> None:
    from policy_router.testing import FakeProvider

    with FakeProvider() as fake:
        conn.send(fake.base_url)
        conn.recv()  # block until told to stop


@contextmanager
def fake_in_child() -> Iterator[str]:
    """Yield the base URL of a FakeProvider serving from another process."""
    parent, child = mp.Pipe()
    process = mp.get_context("spawn").Process(target=_serve, args=(child,), daemon=True)
    process.start()
    try:
        yield str(parent.recv())
    finally:
        parent.send("stop")
        process.join(5)
        if process.is_alive():
            process.terminate()


MESSAGES = [{"role": "user", "content": "Say hello."}]
KEY = "sk-bench"


def bench_routes(
    base: str, capabilities: dict[str, bool] | None = None, **limits: int
) -> list[Any]:
    """Routes openai/a, /b, /c on the FakeProvider at `base`, priced 0.15 / 0.60 per million,
    with `limits` (rpm=, tpm=) when given."""
    from policy_router import PriceTable, Route

    prices = PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-29",
            "source": "benchmark",
            "models": {f"openai/{n}": {"input": "0.15", "output": "0.60"} for n in "abc"},
        }
    )
    return [
        Route(
            f"openai/{n}",
            group="g",
            api_base=base,
            api_key=KEY,
            capabilities=capabilities or {"tools": True, "streaming": True},
            prices=prices,
            **limits,
        )
        for n in "abc"
    ]
