"""The LangChain chat model, with the real langchain-core, against FakeProvider."""

from __future__ import annotations

import asyncio
import json
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain_core", reason="the langchain extra is not installed")

from langchain_core.caches import BaseCache
from langchain_core.load import dumps, loads
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from pydantic import BaseModel

from policy_router import Route, Router
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
    assert message.response_metadata["policy_router"]["answered_by"] == "openai/a"
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


def test_per_call_model_routes_to_that_group(fake: FakeProvider) -> None:
    """invoke(..., model="other") and bind(model=...) route to that group (it raised
    TypeError: multiple values for 'model' before)."""
    router = Router([fake_route(fake, "a"), fake_route(fake, "b", group="other")])
    model = ChatPolicyRouter(router=router, model="g")
    assert model.invoke("hi", model="other").response_metadata["model_name"] == "openai/b"
    assert model.bind(model="other").invoke("hi").response_metadata["model_name"] == "openai/b"
    assert model.invoke("hi").response_metadata["model_name"] == "openai/a"


def test_streams_carry_usage_metadata(fake: FakeProvider) -> None:
    """A stream asks for usage by default, so the merged message has usage_metadata."""
    fake.script("a", Reply("one two", usage=(5, 2)))
    merged = None
    for chunk in chat(fake).stream("hi"):
        merged = chunk if merged is None else merged + chunk
    assert merged is not None and merged.usage_metadata is not None
    assert (merged.usage_metadata["input_tokens"], merged.usage_metadata["output_tokens"]) == (5, 2)
    assert fake.bodies("a")[0]["stream_options"] == {"include_usage": True}


def test_constructor_settings_reach_litellm(fake: FakeProvider) -> None:
    """temperature, max_tokens, stop and timeout are sent (they were dropped before);
    max_retries becomes the router's Retry for the call."""
    fake.script("a", Fail(503), Reply("ok"))
    model = chat(fake, temperature=0, max_tokens=7, stop=["END"], timeout=60, max_retries=1)
    message = model.invoke("hi")
    body = fake.bodies("a")[-1]
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0, 7, ["END"])
    journey = message.response_metadata["policy_router"]
    assert journey["requests"] == 2 and journey["answered_by"] == "openai/a"  # one retry


def test_embeddings_route_through_the_router(fake: FakeProvider) -> None:
    """PolicyRouterEmbeddings is a LangChain Embeddings over Router.embedding: equal texts
    embed equally, batches keep their order, and the async twins agree."""
    from policy_router.integrations.langchain import PolicyRouterEmbeddings

    router = Router([fake_route(fake, "e", capabilities={"embedding": True})])
    embeddings = PolicyRouterEmbeddings(router=router, model="g", chunk_size=2)
    vectors = embeddings.embed_documents(["alpha", "beta", "alpha"])
    assert len(vectors) == 3 and vectors[0] == vectors[2] != vectors[1]
    assert embeddings.embed_query("beta") == vectors[1]
    assert asyncio.run(embeddings.aembed_documents(["alpha"])) == [vectors[0]]
    assert fake.requests("e") == 4  # two batches, one query, one async batch


def test_models_built_from_one_config_file_share_its_router(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config= (or $POLICY_ROUTER_CONFIG) builds the router once per file: a chat model and
    an embeddings model from one file spend from one budget."""
    from policy_router.integrations.langchain import PolicyRouterEmbeddings

    monkeypatch.setenv("FAKE_KEY", "sk-fake-a")
    route = {"api_base": fake.base_url, "api_key": "os.environ/FAKE_KEY"}
    path = tmp_path / "policy.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "budget": {"cap": "1.00", "unpriced": "allow"},
                "groups": {
                    "smart": {
                        "routes": [{"model": "openai/a", **route, "capabilities": {"tools": True}}]
                    },
                    "embed": {
                        "routes": [
                            {"model": "openai/e", **route, "capabilities": {"embedding": True}}
                        ]
                    },
                },
            }
        )
    )
    chat_model = ChatPolicyRouter(config=str(path), model="smart")
    monkeypatch.setenv("POLICY_ROUTER_CONFIG", str(path))
    embeddings = PolicyRouterEmbeddings(model="embed")
    assert embeddings.router is chat_model.router and embeddings.config == str(path)
    chat_model.invoke("Hi")
    embeddings.embed_query("Hi")
    assert chat_model.router.spending().calls == 2
    assert fake.requests("a") == 1 and fake.requests("e") == 1


def test_a_model_without_a_router_or_a_config_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POLICY_ROUTER_CONFIG", raising=False)
    with pytest.raises(ValueError, match=r"router=Router\(\.\.\.\), config=.*POLICY_ROUTER_CONFIG"):
        ChatPolicyRouter(model="smart")


class SerialisingCache(BaseCache):
    """A cache that stores generations as LangChain's SQLiteCache does: `dumps`, `loads`."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], list[str]] = {}

    def lookup(self, prompt: str, llm_string: str) -> Any:
        rows = self.rows.get((prompt, llm_string))
        return [loads(row, allowed_objects="core") for row in rows] if rows else None

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        self.rows[(prompt, llm_string)] = [dumps(g) for g in return_val]

    def clear(self, **kwargs: Any) -> None:
        self.rows.clear()


def test_a_reply_survives_langchains_cache(fake: FakeProvider) -> None:
    """With a serialising cache (as `SQLiteCache` is) the same question twice returns the
    answer, its metadata plain data (the journey as a dict, `response_cost` a number)."""
    from langchain_core.globals import set_llm_cache

    fake.script("a", Reply("cached answer"))
    set_llm_cache(SerialisingCache())
    try:
        model = chat(fake)
        first = model.invoke("same question")
        second = model.invoke("same question")
    finally:
        set_llm_cache(None)
    assert first.content == second.content == "cached answer" and fake.requests() == 1
    assert second.response_metadata["policy_router"]["answered_by"] == "openai/a"
    json.dumps(second.response_metadata)


def test_a_malformed_tool_call_is_an_invalid_tool_call(fake: FakeProvider) -> None:
    """Arguments that are not JSON land in `invalid_tool_calls`, as with ChatOpenAI."""
    fake.script("a", Reply("", tool_calls=[{"name": "get_weather", "arguments": "{city: Oslo"}]))
    message = chat(fake).bind_tools([get_weather]).invoke("weather?")
    assert message.tool_calls == []
    (bad,) = message.invalid_tool_calls
    assert bad["name"] == "get_weather" and bad["args"] == "{city: Oslo"


def test_json_schema_structured_output_sends_response_format(fake: FakeProvider) -> None:
    """`method="json_schema"` sends `response_format`, not tools, so a route with
    structured output and no tools serves it; `bind_tools(strict=True)` marks each tool."""
    from pydantic import BaseModel as Model

    class City(Model):
        name: str
        population: int

    fake.script("a", Reply('{"name": "Oslo", "population": 709000}'))
    router = Router([fake_route(fake, "a", capabilities={"structured_output": True})])
    model = ChatPolicyRouter(router=router, model="g")
    city = model.with_structured_output(City, method="json_schema").invoke("Oslo?")
    assert city == City(name="Oslo", population=709000)
    body = fake.bodies("a")[-1]
    assert body["response_format"]["type"] == "json_schema" and "tools" not in body
    chat(fake).bind_tools([get_weather], strict=True).invoke("weather?")
    assert fake.bodies("a")[-1]["tools"][0]["function"]["strict"] is True


def test_a_model_serialises_and_loads_again_from_its_config_without_its_secrets(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dumps` writes the settings and `config=`, not the live router and not a key held
    in `call_kwargs`; `loads(..., allowed_objects=[ChatPolicyRouter])` rebuilds a model
    that answers through the router built from that file."""
    monkeypatch.setenv("FAKE_KEY", "sk-fake-a")
    path = tmp_path / "policy.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "groups": {
                    "g": {
                        "routes": [
                            {
                                "model": "openai/a",
                                "api_base": fake.base_url,
                                "api_key": "os.environ/FAKE_KEY",
                                "capabilities": {"tools": True},
                            }
                        ]
                    }
                }
            }
        )
    )
    fake.script("a", Reply("loaded again"))
    secret = "sk-serialised-never-1234"
    model = ChatPolicyRouter(
        config=str(path),
        model="g",
        temperature=0.2,
        call_kwargs={
            "api_key": secret,
            "extra_headers": {"Authorization": f"Bearer {secret}", "X-Team": "blue"},
            "user": "u-7",
        },
    )
    assert secret not in dumps(model.bind(x_trace="t"))  # nor through a chain
    text = dumps(model)
    assert secret not in text and "X-Team" in text and "u-7" in text
    loaded = loads(text, allowed_objects=[ChatPolicyRouter], valid_namespaces=["policy_router"])
    assert isinstance(loaded, ChatPolicyRouter) and loaded.temperature == 0.2
    assert loaded.router is model.router  # one router per file per process
    assert loaded.invoke("hi").content == "loaded again"


ROUTER = Router(
    [Route("openai/a", group="g", api_base="http://127.0.0.1:9/v1", api_key="sk-x-1234")]
)
_NAMES = st.sampled_from(["api_key", "X-Api-Key", "Authorization", "token", "client_secret"])
_PLAIN = st.sampled_from(["user", "metadata", "extra_body", "tags", "X-Team"])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    secret=st.text(string.ascii_letters + string.digits, min_size=12, max_size=24),
    path=st.lists(st.tuples(_PLAIN, st.booleans()), max_size=5),
    name=_NAMES,
    bearer=st.booleans(),
)
def test_no_secret_in_call_kwargs_is_serialised_wherever_it_sits(
    secret: str, path: list[tuple[str, bool]], name: str, bearer: bool
) -> None:
    """A secret under any secret-looking name, nested in mappings and lists at any depth
    of `call_kwargs`, is never in what `dumps` writes; the plain keys around it are."""
    value: Any = {name: f"Bearer {secret}" if bearer else secret}
    for key, in_list in reversed(path):
        value = {key: [value] if in_list else value}
    model = ChatPolicyRouter(router=ROUTER, model="g", call_kwargs=value)
    text = dumps(model)
    assert secret not in text
    assert all(key in text for key, _ in path)


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("auto", "auto"),
        ("any", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "get_weather"}}),
        (True, {"type": "function", "function": {"name": "get_weather"}}),
        (False, None),
    ],
)
def test_bind_tools_takes_every_tool_choice_chat_litellm_takes(fake: FakeProvider, given: Any, sent: Any) -> None:
    """A name, "any", OpenAI's dict, True and False, positional as ChatLiteLLM takes it:
    the provider receives OpenAI's `tool_choice` (none for False)."""
    chat(fake).bind_tools([get_weather], given).invoke("weather?")
    body = fake.bodies("a")[-1]
    assert body.get("tool_choice") == sent
