"""The LangChain chat model, with the real langchain-core, against FakeProvider."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from pydantic import BaseModel

from policy_router import Router
from policy_router.integrations.langchain import ChatPolicyRouter
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import fake_route


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It rains in {city}."


def chat(fake: FakeProvider, **kw: object) -> ChatPolicyRouter:
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")])
    return ChatPolicyRouter(router=router, model="g", **kw)  # type: ignore[arg-type]


def test_chain_invokes_through_the_router_with_journey_and_usage(fake: FakeProvider) -> None:
    """prompt | model | StrOutputParser works, falling through a failing route."""
    fake.script("a", Fail(503))
    fake.script("b", Reply("Bonjour.", usage=(9, 2)))
    model = chat(fake)
    prompt = ChatPromptTemplate.from_messages([("system", "Translate."), ("human", "{text}")])
    assert (prompt | model | StrOutputParser()).invoke({"text": "Hello."}) == "Bonjour."
    message = model.invoke([HumanMessage("Hi")])
    assert message.usage_metadata is not None and message.usage_metadata["total_tokens"] > 0
    assert message.response_metadata["policy_router"].answered_by == "openai/a"
    assert fake.bodies("b")[0]["messages"][0] == {"role": "system", "content": "Translate."}


def test_chain_streams_token_by_token(fake: FakeProvider) -> None:
    """stream() yields the reply in pieces as the provider sends them, sync and async."""
    fake.script("a", Reply("one two three four"), Reply("one two three four"))
    chain = chat(fake) | StrOutputParser()
    assert [piece for piece in chain.stream("hi") if piece] == ["one", " two", " three", " four"]

    async def collect() -> list[str]:
        return [piece async for piece in chain.astream("hi")]

    assert "".join(asyncio.run(collect())) == "one two three four"


def test_tool_call_round_trips(fake: FakeProvider) -> None:
    """bind_tools sends the tool, the call comes back parsed, and the result goes back."""
    fake.script(
        "a",
        Reply("", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
        Reply("Take an umbrella."),
    )
    model = chat(fake).bind_tools([get_weather])
    first = model.invoke([HumanMessage("Weather in Oslo?")])
    assert first.tool_calls[0]["name"] == "get_weather"
    assert first.tool_calls[0]["args"] == {"city": "Oslo"}
    result = get_weather.invoke(first.tool_calls[0]["args"])
    final = model.invoke(
        [
            HumanMessage("Weather in Oslo?"),
            first,
            ToolMessage(result, tool_call_id=first.tool_calls[0]["id"]),
        ]
    )
    assert final.content == "Take an umbrella."
    sent = fake.bodies("a")
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather"
    assert sent[1]["messages"][-1] == {
        "role": "tool",
        "content": "It rains in Oslo.",
        "tool_call_id": "call_0",
    }


def test_structured_output(fake: FakeProvider) -> None:
    """with_structured_output returns the schema's object from a tool call."""

    class City(BaseModel):
        name: str
        population: int

    fake.script(
        "a",
        Reply(
            "", tool_calls=[{"name": "City", "arguments": {"name": "Oslo", "population": 709000}}]
        ),
    )
    city = chat(fake).with_structured_output(City).invoke("Tell me about Oslo")
    assert city == City(name="Oslo", population=709000)
