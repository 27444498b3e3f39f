"""LangChain's messages from LiteLLM's answers: text, tool calls (valid and invalid), usage,
and the journey as plain data in `response_metadata` (see `ChatPolicyRouter`).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import ToolCallChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

__all__ = ["chat_result", "final_chunk", "generation_chunk", "journey_data"]


def _usage(response: Any) -> UsageMetadata | None:
    usage = getattr(response, "usage", None)
    if usage is None or getattr(usage, "prompt_tokens", None) is None:
        return None
    return UsageMetadata(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )



def journey_data(journey: Any) -> dict[str, Any]:
    """The journey as plain data, which survives LangChain's serialisation and caches: its
    id, group, the route that answered, the requests sent, the cost, and every step as the
    sentence the journey prints."""
    cost = journey.cost
    return {
        "id": journey.id,
        "group": journey.group,
        "answered_by": journey.answered_by,
        "requests": len(journey.attempts),
        "elapsed": round(journey.elapsed, 6),
        "cost": str(cost.amount) if cost is not None else None,
        "currency": cost.currency if cost is not None else None,
        "steps": [str(step) for step in journey.steps],
        "text": str(journey),
    }



def _metadata(journey: Any, route: str) -> dict[str, Any]:
    cost = journey.cost
    return {
        "model_name": route,
        "model_provider": "policy_router",
        "policy_router": journey_data(journey),
        # As ChatLiteLLM gives it: a number in the currency's units.
        "response_cost": float(cost.amount) if cost is not None else None,
    }



def _tool_calls(message: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Tool calls whose arguments are JSON, and the others as LangChain's invalid ones."""
    valid, invalid = [], []
    for tc in message.tool_calls or []:
        raw = tc.function.arguments or "{}"
        try:
            args = json.loads(raw)
        except ValueError as error:
            invalid.append(
                {"name": tc.function.name, "args": raw, "id": tc.id, "error": str(error),
                 "type": "invalid_tool_call"}
            )
            continue
        if not isinstance(args, dict):
            invalid.append(
                {"name": tc.function.name, "args": raw, "id": tc.id,
                 "error": "arguments are not a JSON object", "type": "invalid_tool_call"}
            )
            continue
        valid.append({"name": tc.function.name, "args": args, "id": tc.id, "type": "tool_call"})
    return valid, invalid



def chat_result(response: Any, journey: Any, route: str) -> ChatResult:
    generations = []
    for choice in response.choices:
        message = choice.message
        tool_calls, invalid = _tool_calls(message)
        ai = AIMessage(
            content=message.content or "",
            tool_calls=tool_calls,
            invalid_tool_calls=invalid,
            usage_metadata=_usage(response),
            response_metadata={**_metadata(journey, route), "finish_reason": choice.finish_reason},
        )
        generations.append(ChatGeneration(message=ai))
    return ChatResult(generations=generations, llm_output={"model_name": route})



def generation_chunk(chunk: Any) -> ChatGenerationChunk:
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



def final_chunk(stream: Any) -> ChatGenerationChunk:
    """An empty chunk carrying the journey, so the merged message has it in its metadata."""
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            response_metadata=_metadata(stream.journey, stream.route),
        )
    )
