"""Frameworks that call `litellm.completion` themselves run on the router through the
LiteLLM provider, unchanged but for their model string."""

from __future__ import annotations

from collections.abc import Iterator

import dspy
import pytest
import smolagents

from policy_router import Router
from policy_router.integrations.litellm import register, unregister
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import fake_route, prices

DSPY_ANSWER = Reply("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]")


@pytest.fixture
def smart(fake: FakeProvider) -> Iterator[Router]:
    router = Router([fake_route(fake, "a", group="smart"), fake_route(fake, "b", group="smart")])
    register(router)
    yield router
    unregister()


def test_dspy_predicts_through_the_router(smart: Router, fake: FakeProvider) -> None:
    """`dspy.LM("policy_router/smart")`: a failing route is skipped, DSPy gets its answer."""
    fake.script("a", Fail(503))
    fake.script("b", DSPY_ANSWER)
    lm = dspy.LM("policy_router/smart", cache=False, num_retries=0)
    with dspy.context(lm=lm):
        answer = dspy.Predict("question -> answer")(question="Capital of France?").answer
    assert answer == "Paris" and fake.requests() == 2


def test_dspy_usage_and_history_carry_the_providers_numbers_and_the_routers_cost(fake: FakeProvider) -> None:
    """`track_usage` counts the tokens the provider billed; `lm.history` has what the
    router charged the whole request (a failed route's attempt and the answer's)."""
    table = prices(a="1000", b="1000")
    router = Router([fake_route(fake, "a", group="smart", prices=table), fake_route(fake, "b", group="smart", prices=table)])
    register(router)
    try:
        fake.script("a", Fail(503))
        fake.script("b", Reply("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", usage=(11, 7)))
        lm = dspy.LM("policy_router/smart", cache=False, num_retries=0)
        with dspy.context(lm=lm, track_usage=True):
            answer = dspy.Predict("question -> answer")(question="Capital of France?")
        usage = answer.get_lm_usage()["policy_router/smart"]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (11, 7)
        assert lm.history[-1]["cost"] == pytest.approx(0.018)  # 18 tokens at $1000 a million
    finally:
        unregister()
        router.close()


def test_smolagents_model_calls_through_the_router(smart: Router, fake: FakeProvider) -> None:
    """smolagents' `LiteLLMModel` (which always passes api_key/api_base, unset) is routed."""
    fake.script("a", Reply("Hello from the router."))
    model = smolagents.LiteLLMModel(model_id="policy_router/smart")
    out = model([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert out.content == "Hello from the router." and fake.requests() == 1


def _weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def test_dspy_native_function_calling_sends_the_tools_through_a_group(
    smart: Router, fake: FakeProvider
) -> None:
    """`ChatAdapter(use_native_function_calling=True)` asks LiteLLM whether the model
    supports function calling; a group with a tool-capable route says yes, so DSPy sends
    the tools and reads the tool call back."""

    class Ask(dspy.Signature):
        question: str = dspy.InputField()
        tools: list[dspy.Tool] = dspy.InputField()
        outputs: dspy.ToolCalls = dspy.OutputField()

    fake.script("a", Reply("", tool_calls=[{"name": "_weather", "arguments": {"city": "Oslo"}}]))
    lm = dspy.LM("policy_router/smart", cache=False, num_retries=0)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        out = dspy.Predict(Ask)(question="Weather in Oslo?", tools=[dspy.Tool(_weather)])
    (call,) = out.outputs.tool_calls
    assert (call.name, call.args) == ("_weather", {"city": "Oslo"})
    (body,) = fake.bodies("a")
    assert [t["function"]["name"] for t in body["tools"]] == ["_weather"]


def test_dspy_json_adapter_asks_a_schema_of_a_route_that_can_follow_one(fake: FakeProvider) -> None:
    """DSPy's JSON adapter asks LiteLLM, before its first call, which parameters the model
    takes and whether it follows a schema: right after `register` both are known, so the
    schema is sent and the router gives it to the group's route with structured outputs,
    never to the one without. A group with no such route gets JSON mode, refused before
    anything is sent."""
    router = Router([
        fake_route(fake, "plain", group="smart", capabilities={"tools": True}),
        fake_route(fake, "schema", group="smart", capabilities={"structured_output": True}),
        fake_route(fake, "basic", group="basic", capabilities={"tools": True}),
    ])
    register(router)
    try:
        fake.script("schema", Reply('{"answer": "Paris"}'))
        lm = dspy.LM("policy_router/smart", cache=False, num_retries=0)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            answer = dspy.Predict("question -> answer")(question="Capital of France?").answer
        assert answer == "Paris"
        assert fake.requests("plain") == 0
        (body,) = fake.bodies("schema")
        assert body["response_format"]["type"] == "json_schema"
        assert "answer" in body["response_format"]["json_schema"]["schema"]["properties"]
        basic = dspy.LM("policy_router/basic", cache=False, num_retries=0)
        with dspy.context(lm=basic, adapter=dspy.JSONAdapter()), pytest.raises(Exception, match="needs structured output"):
            dspy.Predict("question -> answer")(question="Capital of France?")
        assert fake.requests("basic") == 0
    finally:
        unregister()
        router.close()


@pytest.fixture
def crewai_globals() -> Iterator[None]:
    """CrewAI sets `litellm.drop_params = True` for the whole process on its first call;
    with it LiteLLM re-sends a request a provider answered 422 (its params dropped), a
    send the router never sees. Put back for the rest of the suite."""
    import litellm

    before = litellm.drop_params
    yield
    litellm.drop_params = before


@pytest.mark.usefixtures("crewai_globals")
def test_crewai_llm_answers_through_the_router(smart: Router, fake: FakeProvider) -> None:
    """`crewai.LLM(model="policy_router/smart")` goes through LiteLLM to the router: a
    failing route is skipped."""
    import crewai

    fake.script("a", Fail(503))
    fake.script("b", Reply("Hi from the crew."))
    llm = crewai.LLM(model="policy_router/smart")
    assert llm.call("hello") == "Hi from the crew."
    assert fake.requests() == 2


@pytest.mark.usefixtures("crewai_globals")
def test_crewai_does_not_retry_a_refusal(fake: FakeProvider) -> None:
    """A request the router refuses before sending (no route has tools) reaches CrewAI as
    a 400 it does not retry: the router is asked once, the provider never."""
    import crewai

    started: list[object] = []
    router = Router(
        [fake_route(fake, "a", group="plain", capabilities={"chat": True})],
        observers=[lambda e: started.append(e) if type(e).__name__ == "RequestStarted" else None],
    )
    register(router)
    try:
        llm = crewai.LLM(model="policy_router/plain")
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        with pytest.raises(Exception) as raised:
            llm.call([{"role": "user", "content": "hi"}], tools=[tool])
    finally:
        unregister()
    assert "no route" in str(raised.value).lower()
    assert len(started) == 1 and fake.requests() == 0


def test_instructor_from_litellm_fills_a_model_through_the_router(
    smart: Router, fake: FakeProvider
) -> None:
    """`instructor.from_litellm(litellm.completion)`: the structured-output tool call is
    answered through the router and validated into the pydantic model."""
    import instructor
    import litellm
    from pydantic import BaseModel

    class User(BaseModel):
        name: str
        age: int

    fake.script("a", Reply("", tool_calls=[{"name": "User", "arguments": {"name": "Jason", "age": 25}}]))
    client = instructor.from_litellm(litellm.completion)
    user = client.chat.completions.create(
        model="policy_router/smart", response_model=User, max_retries=0,
        messages=[{"role": "user", "content": "Jason is 25."}],
    )
    assert (user.name, user.age) == ("Jason", 25)
    assert fake.bodies("a")[0]["tools"][0]["function"]["name"] == "User"


def test_the_openai_agents_sdk_runs_an_agent_through_the_router(
    smart: Router, fake: FakeProvider
) -> None:
    """The Agents SDK's `LitellmModel(model="policy_router/smart")` runs an agent."""
    from agents import Agent, Runner, set_tracing_disabled
    from agents.extensions.models.litellm_model import LitellmModel

    set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    fake.script("a", Fail(500))
    fake.script("b", Reply("Hello from the agent."))
    agent = Agent(name="helper", instructions="Be brief.", model=LitellmModel(model="policy_router/smart"))
    assert Runner.run_sync(agent, "hello").final_output == "Hello from the agent."
    assert fake.requests() == 2
