"""LangChain's own standard test suites (`langchain-tests`), run against ChatPolicyRouter and
PolicyRouterEmbeddings over FakeProvider: a suite written by others, with its flags set
to what this model honestly does.

The integration suites call a live model; here that model is FakeProvider behind the
router, over LiteLLM's real HTTP path, with the `Cooperative` responder: it calls the tool a
request binds (with arguments made from the tool's schema) and answers a JSON schema with an
instance of it, so tool calling and structured output run end to end through the router,
the LiteLLM response and ChatPolicyRouter's translation. Images, PDFs and audio run with
samples made here instead of the suite's downloads; the flags left off say why.
"""

from __future__ import annotations

import importlib
import io
import os
import struct
import tempfile
import wave
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import vcr
import yaml

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

# The module, not the function of the same name that the package exports.
loading = importlib.import_module("langchain_core.load.load")


def _png() -> bytes:
    """A valid 2x2 RGB PNG."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _wav() -> bytes:
    """A tenth of a second of silence, 8 kHz mono."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    return out.getvalue()


_PDF = (
    b"%PDF-1.1\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)
_SAMPLES = {".png": _png(), ".pdf": _PDF, ".wav": _wav()}

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


CHAT = {"tools": True, "streaming": True, "structured_output": True, "images": True}
ROUTER = Router(
    [
        _route("smart-a", "smart", CHAT),
        _route("smart-b", "smart", CHAT),
        _route("other", "other", CHAT),
        _route("embedder", "embed", {"embedding": True}),
    ]
)


# The same routes as a policy file, for construction from the environment
# ($POLICY_ROUTER_CONFIG), as other chat models read their key from it.
_CONFIG_DIR = tempfile.TemporaryDirectory(prefix="policy-router-langchain-")
CONFIG = os.path.join(_CONFIG_DIR.name, "policy.yaml")
with open(CONFIG, "w") as _file:
    yaml.safe_dump(
        {
            "groups": {
                "smart": {
                    "routes": [
                        {"model": "openai/smart-a", "api_base": FAKE.base_url, "capabilities": CHAT}
                    ]
                }
            }
        },
        _file,
    )


@pytest.fixture(scope="module", autouse=True)
def _provider() -> Iterator[None]:
    yield
    FAKE.stop()
    _CONFIG_DIR.cleanup()


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

    # Images, PDFs and audio go through as the suite sends them (LangChain's own content
    # blocks and OpenAI's); the samples it would download from the web are served from
    # this machine (`_samples_offline`).
    @property
    def supports_image_inputs(self) -> bool:
        return True

    @property
    def supports_pdf_inputs(self) -> bool:
        return True

    @property
    def supports_audio_inputs(self) -> bool:
        return True

    @property
    def supports_image_tool_message(self) -> bool:
        return True

    @property
    def supports_pdf_tool_message(self) -> bool:
        return True

    @property
    def supports_anthropic_inputs(self) -> bool:
        return True

    @property
    def enable_vcr_tests(self) -> bool:
        return True

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"POLICY_ROUTER_CONFIG": CONFIG}, {"model": "smart"}, {"config": CONFIG}



class TestChatPolicyRouterUnit(_Flags, ChatModelUnitTests):
    """The unit suite: construction, standard params, serialisation, per-call model."""

    @pytest.fixture(autouse=True)
    def _listed_for_load(self, request: pytest.FixtureRequest) -> Iterator[None]:
        """The suite's round trip runs as written, and loads with `allowed_objects="all"`,
        which admits only the classes in langchain-core's partner mapping. For that one
        test this class is listed there, as a partner package's would be; a user loads it
        with `allowed_objects=[ChatPolicyRouter]` (test_langchain.py)."""
        if request.node.name != "test_serdes":
            yield
            return
        path = (*ChatPolicyRouter.get_lc_namespace(), ChatPolicyRouter.__name__)
        with (
            mock.patch.dict(loading.ALL_SERIALIZABLE_MAPPINGS, {path: path}),
            mock.patch.dict(loading._default_class_paths_cache, clear=True),
        ):
            yield


class TestChatPolicyRouterIntegration(_Flags, ChatModelIntegrationTests):
    """The integration suite, with FakeProvider as the live model."""

    @pytest.fixture(autouse=True)
    def _samples_offline(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The suite downloads an image, a PDF and a WAV from the web, which this machine
        and CI cannot reach: the same kinds of file, made here, answer those URLs."""
        import langchain_tests.integration_tests.chat_models as suite

        def get(url: str, **_: Any) -> SimpleNamespace:
            for ending, sample in _SAMPLES.items():
                if url.endswith(ending):
                    return SimpleNamespace(content=sample)
            raise AssertionError(f"the suite asked for {url}, which has no local sample")

        monkeypatch.setattr(suite, "httpx", SimpleNamespace(get=get))
        monkeypatch.setenv("LANGCHAIN_TESTS_USER_AGENT", "policy-router-tests (offline)")

    # The VCR test benchmarks a stream replayed from a cassette. The cassette is recorded
    # here first, from FakeProvider through the router, into a temporary directory: none is
    # kept in the repository, and the key is filtered out of it.
    @pytest.fixture
    def vcr_config(self) -> dict[str, Any]:
        return {"record_mode": "none", "filter_headers": _NO_KEYS, "allow_playback_repeats": True}

    @pytest.fixture
    def vcr_cassette_dir(
        self, tmp_path: Path, request: pytest.FixtureRequest, default_cassette_name: str
    ) -> str:
        if request.node.name == "test_stream_time":
            recorder = vcr.VCR(record_mode="all", filter_headers=_NO_KEYS)
            with recorder.use_cassette(str(tmp_path / f"{default_cassette_name}.yaml")):
                for _ in ChatPolicyRouter(**self.chat_model_params).stream(
                    "Write a story about a cat."
                ):
                    pass
        return str(tmp_path)


_NO_KEYS = [("authorization", "PLACEHOLDER")]


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
