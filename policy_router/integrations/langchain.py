"""A LangChain chat model over a `Router` and a group: `ChatPolicyRouter`.

    model = ChatPolicyRouter(router=router, model="smart")
    chain = prompt | model | StrOutputParser()

It is a real `langchain_core` `BaseChatModel`: `invoke`, `ainvoke`, `stream`, `astream`,
`bind_tools` and `with_structured_output` work as for any chat model. Every call goes
through the router, so requirements, the floor, the breaker, the budget and the deadline
apply; the journey is in each message's `response_metadata["policy_router"]`, and token
usage in `usage_metadata`. Needs the `langchain` extra (`pip install policy-router[langchain]`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    convert_to_openai_messages,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import ToolCallChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from ..router import Router

__all__ = ["ChatPolicyRouter"]


class ChatPolicyRouter(BaseChatModel):
    """A LangChain chat model that routes every call through a `Router` group.

    `model` names the group (as `model=` does for `Router.completion`); `call_kwargs`
    are LiteLLM keyword arguments sent with every call (`max_tokens`, `temperature`, ...,
    and the router's own `on_device`, `needs`, `deadline`). It adds no retries of its own.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    router: Router
    model: str | None = None
    call_kwargs: dict[str, Any] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "policy-router"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, **self.call_kwargs}

    def _kwargs(
        self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any
    ) -> dict[str, Any]:
        call = {**self.call_kwargs, **kwargs, "messages": convert_to_openai_messages(messages)}
        if stop:
            call["stop"] = stop
        return call

    # -- whole answers ---------------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        routed = self.router.route(model=self.model, **self._kwargs(messages, stop, **kwargs))
        return _result(routed.response, routed.journey, routed.route.name)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        routed = await self.router.aroute(
            model=self.model, **self._kwargs(messages, stop, **kwargs)
        )
        return _result(routed.response, routed.journey, routed.route.name)

    # -- streams ---------------------------------------------------------------------------
    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call = self._kwargs(messages, stop, **kwargs)
        stream = self.router.completion(model=self.model, stream=True, **call)
        for chunk in stream:
            generation = _chunk(chunk)
            if run_manager is not None and generation.text:
                run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation
        yield _final_chunk(stream)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call = self._kwargs(messages, stop, **kwargs)
        stream = await self.router.acompletion(model=self.model, stream=True, **call)
        async for chunk in stream:
            generation = _chunk(chunk)
            if run_manager is not None and generation.text:
                await run_manager.on_llm_new_token(generation.text, chunk=generation)
            yield generation
        yield _final_chunk(stream)

    # -- tools -----------------------------------------------------------------------------
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools in OpenAI's format; the router then needs routes that can do tools."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None and tool_choice not in ("auto", "none", "required", "any"):
            tool_choice_value: Any = {"type": "function", "function": {"name": tool_choice}}
        else:
            tool_choice_value = "required" if tool_choice == "any" else tool_choice
        if tool_choice_value is not None:
            kwargs["tool_choice"] = tool_choice_value
        return super().bind(tools=formatted, **kwargs)


def _usage(response: Any) -> UsageMetadata | None:
    usage = getattr(response, "usage", None)
    if usage is None or getattr(usage, "prompt_tokens", None) is None:
        return None
    return UsageMetadata(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def _result(response: Any, journey: Any, route: str) -> ChatResult:
    message = response.choices[0].message
    tool_calls = [
        {
            "name": tc.function.name,
            "args": json.loads(tc.function.arguments or "{}"),
            "id": tc.id,
            "type": "tool_call",
        }
        for tc in (message.tool_calls or [])
    ]
    ai = AIMessage(
        content=message.content or "",
        tool_calls=tool_calls,
        usage_metadata=_usage(response),
        response_metadata={
            "model_name": route,
            "finish_reason": response.choices[0].finish_reason,
            "policy_router": journey,
        },
    )
    return ChatResult(generations=[ChatGeneration(message=ai)])


def _chunk(chunk: Any) -> ChatGenerationChunk:
    choice = chunk.choices[0] if chunk.choices else None
    delta = getattr(choice, "delta", None)
    tool_chunks = [
        ToolCallChunk(name=tc.function.name, args=tc.function.arguments, id=tc.id, index=tc.index)
        for tc in (getattr(delta, "tool_calls", None) or [])
    ]
    message = AIMessageChunk(
        content=getattr(delta, "content", None) or "",
        tool_call_chunks=tool_chunks,
        usage_metadata=_usage(chunk),
    )
    info = {"finish_reason": choice.finish_reason} if choice and choice.finish_reason else None
    return ChatGenerationChunk(message=message, generation_info=info)


def _final_chunk(stream: Any) -> ChatGenerationChunk:
    """An empty chunk carrying the journey, so the merged message has it in its metadata."""
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            response_metadata={"policy_router": stream.journey, "model_name": stream.route},
        )
    )
