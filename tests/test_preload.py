"""A process's first provider failure imports nothing heavy in the call's middle, and the
server's first stream loads no encoding: what LiteLLM loads lazily there (FastAPI's
exceptions on its failure path, tiktoken's default encoding on a stream's usage count) is
loaded before, so no deadline is passed and no event loop stalls for it
(`drive.seam.preload`).

Each case runs in a fresh interpreter: the suite's own process imported everything long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_ROUTER = textwrap.dedent(
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

        asyncio.run(answer())  # the route's first call: LiteLLM builds its clients here
        print(json.dumps(new_modules(lambda: asyncio.run(fail()))))
    """
)

_SERVER = textwrap.dedent(
    """
    import json, os, sys
    from starlette.testclient import TestClient
    from policy_router.server import create_app
    from policy_router.testing import FakeProvider

    os.environ["PROVIDER_KEY"] = "sk-m"
    with FakeProvider() as fake:
        route = {"model": "openai/m", "api_base": fake.base_url, "api_key": "os.environ/PROVIDER_KEY",
                 "capabilities": {"chat": True, "streaming": True}}
        app = create_app({"groups": {"g": {"routes": [route]}}},
                         env={"POLICY_ROUTER_API_KEY": "sk-tenant"})
        ask = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
        with TestClient(app, headers={"authorization": "Bearer sk-tenant"}) as http:
            assert http.post("/v1/chat/completions", json=ask).status_code == 200
            before = set(sys.modules)
            streamed = http.post("/v1/chat/completions", json={**ask, "stream": True,
                                 "stream_options": {"include_usage": True}})
            assert streamed.status_code == 200 and "[DONE]" in streamed.text, streamed.text
        print(json.dumps(sorted(set(sys.modules) - before)))
    """
)


def _imported(script: str) -> list[str]:
    """The modules a fresh interpreter running `script` reported it imported."""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_process_s_first_failure_imports_nothing() -> None:
    """Without the preload, LiteLLM imported ~100 modules of FastAPI inside the first failed
    call (0.13-0.25 s here, 2.6 s with one busy thread in the process)."""
    assert _imported(_ROUTER) == []


def test_the_server_s_first_stream_loads_no_encoding() -> None:
    """Without the preload, the first stream's usage count loaded tiktoken's default
    encoding in the call, on the server's event loop (0.13-0.2 s here). A few small modules
    of LiteLLM's stream path still load on first use and are not counted."""
    heavy = [m for m in _imported(_SERVER) if m.startswith(("tiktoken", "fastapi"))
             or m.endswith("default_encoding")]
    assert heavy == []
