"""Every answer of the server carries a request id, as OpenAI's and Anthropic's APIs do.

The SDKs read it (`_request_id` in the openai and anthropic SDKs, `request_id` in the Node
SDK's errors) so a user can quote it. OpenAI names the header `x-request-id`, Anthropic `request-id`: both are sent. It is an ASGI
middleware rather than a Starlette one so a streamed answer is passed on as it comes.
"""

from __future__ import annotations

from typing import Any

from ..ground.ids import new_id

__all__ = ["RequestIds"]


class RequestIds:
    """ASGI middleware: each HTTP answer gets `x-request-id` and `request-id` (one new id,
    `req_` and hex), whatever its status; other ASGI messages pass untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        named = f"req_{new_id()}".encode()

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", named), (b"request-id", named)]
            await send(message)

        await self.app(scope, receive, sending)
