"""LangChain's own standard test suites (`langchain-tests`), run against ChatPolicyRouter and
PolicyRouterEmbeddings over FakeProvider: a suite written by others, with its flags set
to what this model honestly does.

The integration suites call a live model; here that model is FakeProvider behind the
router, over LiteLLM's real HTTP path, with the `Cooperative` responder: it calls the tool a
request binds (with arguments made from the tool's schema) and answers a JSON schema with an
instance of it, so tool calling and structured output run end to end through the router,
the LiteLLM response and ChatPolicyRouter's translation. The flags left off are the inputs
FakeProvider cannot take or the suite cannot fetch here (images from the web, PDFs, audio),
each saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_tests", reason="the dev extra (langchain-tests) is not installed")

from langchain_tests.integration_tests import (
    ChatModelIntegrationTests,
    EmbeddingsIntegrationTests,
)
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests

from policy_router import Route, Router
from policy_router.integrations.langchain import (
    ChatPolicyRouter,
    PolicyRouterEmbeddings,
)
from policy_router.testing import Cooperative, FakeProvider

from .conftest import KEY_PREFIX

# The standard suites read their settings from class properties, which cannot take
# fixtures: the provider starts here and stops when the module's tests are done.
FAKE = FakeProvider(responder=Cooperative()).start()


def _route(name: str, group: str, capabilities: dict[str, bool]) -> Route:
    return Route(
        f"openai/{name}",
        group=group,
        api_base=FAKE.base_url,
        api_key=f"{KEY_PREFIX}{name}",
        capabilities=capabilities,
    )


CHAT = {"tools": True, "streaming": True, "structured_output": True}
ROUTER = Router(
    [
        _route("smart-a", "smart", CHAT),
        _route("smart-b", "smart", CHAT),
        _route("other", "other", CHAT),
        _route("embedder", "embed", {"embedding": True}),
    ]
)


@pytest.fixture(scope="module", autouse=True)
def _provider() -> Iterator[None]:
    yield
    FAKE.stop()


class _Flags:
    """What ChatPolicyRouter over FakeProvider honestly does."""

    @property
    def chat_model_class(self) -> type[ChatPolicyRouter]:
        return ChatPolicyRouter

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"router": ROUTER, "model": "smart"}

    @property
    def model_override_value(self) -> str:
        return "other"  # another group of the same router

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    # Off, and why: the image, PDF and audio tests download their samples from the web
    # (wikimedia.org), which this machine and CI cannot reach; the Anthropic-inputs test
    # sends Anthropic's own content blocks, which an OpenAI-shaped provider does not take;
    # the VCR test replays a cassette recorded against a real provider.
    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def supports_pdf_inputs(self) -> bool:
        return False

    @property
    def supports_audio_inputs(self) -> bool:
        return False

    @property
    def supports_anthropic_inputs(self) -> bool:
        return False

    @property
    def enable_vcr_tests(self) -> bool:
        return False


class TestChatPolicyRouterUnit(_Flags, ChatModelUnitTests):
    """The unit suite: construction, standard params, serialisation, per-call model."""


class TestChatPolicyRouterIntegration(_Flags, ChatModelIntegrationTests):
    """The integration suite, with FakeProvider as the live model."""


class TestPolicyRouterEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[PolicyRouterEmbeddings]:
        return PolicyRouterEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"router": ROUTER, "model": "embed"}


class TestPolicyRouterEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[PolicyRouterEmbeddings]:
        return PolicyRouterEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"router": ROUTER, "model": "embed"}
