"""A process's first provider failure and first stream import nothing heavy in the call's
middle: what LiteLLM loads lazily there (FastAPI's exceptions on its failure path, the
default tiktoken encoding on a stream's usage count) is loaded when the router is built,
so no deadline is passed and no event loop stalls for it (`drive.seam.preload`).

Each case runs in a fresh interpreter: the suite's own process imported everything long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from policy_router import Route, Router
    from policy_router.testing import Fail, FakeProvider

    def new_modules(call):
        before = set(sys.modules)
        call()
        return sorted(set(sys.modules) - before)

    with FakeProvider() as fake:
        router = Router([Route("openai/m", group="g", api_base=fake.base_url, api_key="sk-m",
                               capabilities={"chat": True, "streaming": True})], breaker=None)
        ask = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}

        async def answer():
            await router.acompletion(**ask)

        async def fail():
            fake.script("m", Fail(500))
            try:
                await router.acompletion(**ask)
            except Exception as error:
                assert type(error).__name__ == "InternalServerError", repr(error)
            else:
                raise AssertionError("the scripted 500 answered")

        async def stream():
            chunks = await router.acompletion(**ask, stream=True, stream_options={"include_usage": True})
            async for _ in chunks:
                pass

        asyncio.run(answer())  # the route's first call: LiteLLM builds its clients here
        print(json.dumps({
            "failure": new_modules(lambda: asyncio.run(fail())),
            "stream": new_modules(lambda: asyncio.run(stream())),
        }))
    """
)


@pytest.fixture(scope="module")
def imported() -> dict[str, list[str]]:
    """The modules a fresh process imported during its first failure and its first stream."""
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_process_s_first_failure_imports_nothing(imported: dict[str, list[str]]) -> None:
    """Without the preload, LiteLLM imported ~100 modules of FastAPI inside the first failed
    call (0.13-0.25 s here, 2.6 s with one busy thread in the process)."""
    assert imported["failure"] == []


def test_a_process_s_first_stream_loads_no_encoding(imported: dict[str, list[str]]) -> None:
    """Without the preload, the first stream's usage count loaded tiktoken's default
    encoding in the call (0.13-0.2 s here). LiteLLM's few small stream modules still load
    on first use and are not counted."""
    heavy = [m for m in imported["stream"] if m.startswith(("tiktoken", "fastapi"))
             or m.endswith("default_encoding")]
    assert heavy == []
