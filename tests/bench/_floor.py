"""The bare floor of an LLM gateway: `litellm.acompletion` in a Starlette handler under
uvicorn, nothing else (no keys, no policy, no budget). What any gateway over LiteLLM costs
at least; `tests/bench/server.py` compares `policy-router serve` with it.

Run: `python tests/bench/_floor.py PORT PROVIDER_BASE_URL` (one route, `openai/a`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

import litellm
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def app(base: str) -> Starlette:
    async def chat(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        body.pop("model", None)
        answer = await litellm.acompletion(model="openai/a", api_base=base, api_key="sk-bench", **body)
        if body.get("stream"):
            async def events() -> AsyncIterator[bytes]:
                async for chunk in answer:
                    yield f"data: {chunk.model_dump_json(exclude_none=True)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(json.loads(answer.model_dump_json()))

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])


if __name__ == "__main__":
    uvicorn.run(app(sys.argv[2]), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
