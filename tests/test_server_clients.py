"""`policy-router serve` with the clients teams point at it, each with its own defaults: the
OpenAI Node SDK through `node` (embeddings asked as base64, `models.retrieve`, legacy
completions, request ids), the openai SDK with the arguments its 2.54 types define, and a
Prometheus scrape of `/metrics` read by prometheus-client's own parser."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from base64 import b64decode
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from policy_router.testing import Fail, FakeProvider

from .test_server import MESSAGES, ROOT, SOLO, TEAM, client, policy, served

NODE_DIR = ROOT / "tests" / "node"
ADMIN = "sk-admin-scrape-9"


@pytest.fixture(scope="module")
def server(_fake_server: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import os

    os.environ["ADMIN_KEY"] = ADMIN
    data = policy(_fake_server, breaker=False)
    data["server"]["admin_keys"] = {"ops": {"key": "os.environ/ADMIN_KEY"}}
    with served(tmp_path_factory.mktemp("clients"), data) as (base, _):
        yield base


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: the Node SDK's tests run where it is")
    if not (NODE_DIR / "node_modules" / "openai").is_dir():
        pytest.fail("the OpenAI Node SDK is not installed: `make install` runs npm ci in tests/node")
    return node


def test_the_node_sdk_with_its_defaults(fake: FakeProvider, server: str) -> None:
    """Chat whole and streamed, embeddings as the SDK asks for them by default (base64,
    decoded by the SDK to the provider's floats), a model looked up and a missing one
    (404 model_not_found), a legacy completion; every answer has a request id."""
    done = subprocess.run(
        [_node(), str(NODE_DIR / "client.mjs"), server, TEAM],
        capture_output=True, text=True, timeout=120, cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["chat"]["text"] == "Hello from FakeProvider."
    assert seen["chat"]["requestId"].startswith("req_")
    assert seen["stream"] == "Hello from FakeProvider."
    sent = [row["embedding"] for row in fake_embeddings(fake)]
    assert len(seen["embeddings"]) == 2 and all(len(v) == len(sent[0]) for v in seen["embeddings"])
    for got, made in zip(seen["embeddings"], sent, strict=True):
        assert got == pytest.approx(made, rel=1e-6)
    assert any(abs(x) > 0 for x in seen["embeddings"][0])
    assert seen["model"] == {"id": "smart", "object": "model"}
    assert seen["missing"]["status"] == 404 and seen["missing"]["code"] == "model_not_found"
    assert seen["missing"]["requestId"].startswith("req_")
    assert seen["completion"]


def fake_embeddings(fake: FakeProvider) -> list[dict[str, Any]]:
    """The vectors FakeProvider makes for the inputs it was sent, by asking it directly."""
    body = fake.bodies("embedder")[-1]
    reply = httpx.post(f"{fake.base_url}/embeddings", json={"model": "embedder", "input": body["input"]}, timeout=10)
    data: list[dict[str, Any]] = reply.json()["data"]
    return data


def test_base64_embeddings_are_float32_little_endian(fake: FakeProvider, server: str) -> None:
    raw = httpx.post(
        f"{server}/embeddings", headers={"Authorization": f"Bearer {TEAM}"},
        json={"model": "emb", "input": "one", "encoding_format": "base64"}, timeout=30,
    ).json()
    encoded = raw["data"][0]["embedding"]
    assert isinstance(encoded, str)
    decoded = list(struct.unpack(f"<{len(b64decode(encoded)) // 4}f", b64decode(encoded)))
    assert decoded == pytest.approx(fake_embeddings(fake)[0]["embedding"], rel=1e-6)
    assert "encoding_format" not in fake.bodies("embedder")[-1]  # every provider sends floats
    floats = client(server).embeddings.create(model="emb", input="one", encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(decoded, rel=1e-6)


def test_the_arguments_the_python_sdk_defines_are_taken_and_requests_have_ids(fake: FakeProvider, server: str) -> None:
    sdk = client(server)
    answer = sdk.chat.completions.create(
        model="smart", messages=MESSAGES,  # type: ignore[arg-type]
        prompt_cache_key="k-1", prompt_cache_retention="24h", safety_identifier="u-hash", moderation=None,  # type: ignore[call-arg]
    )
    assert answer._request_id is not None and answer._request_id.startswith("req_")
    reply = sdk.responses.create(model="smart", input="Say hello.", prompt_cache_retention="24h", context_management=None)  # type: ignore[call-arg]
    assert reply.output_text == "Hello from FakeProvider."


def test_models_retrieve_and_a_completion_through_the_python_sdk(fake: FakeProvider, server: str) -> None:
    sdk = client(server, SOLO)
    assert sdk.models.retrieve("emb").id == "emb"
    with pytest.raises(openai.NotFoundError):
        sdk.models.retrieve("no-such-group")
    text = sdk.completions.create(model="smart", prompt="Say hello.", max_tokens=20)
    assert text.choices[0].text
    streamed = "".join(c.choices[0].text for c in sdk.completions.create(model="smart", prompt="Say hello.", max_tokens=20, stream=True))
    assert streamed == text.choices[0].text
    assert fake.requests("cloud") == 2


def _samples(text: str) -> list[Any]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def test_a_prometheus_scrape_counts_requests_attempts_refusals_and_spend(fake: FakeProvider, server: str) -> None:
    """After a failover, a refusal and an answer: the scrape (an admin key's) counts them
    by key name, group, route and status; no key's text and no prompt is in it; a regular
    key gets 403."""
    sdk = client(server)
    fake.script("cloud", Fail(500))
    sdk.chat.completions.create(model="smart", messages=[{"role": "user", "content": "a secret prompt"}])
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="made-up-model-name", messages=MESSAGES)  # type: ignore[arg-type]
    scrape = httpx.get(f"{server[: -len('/v1')]}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    samples = _samples(scrape.text)

    def value(name: str, **labels: str) -> float:
        return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())

    assert value("policy_router_requests_total", key="team", group="smart", route="openai/local", status="200") >= 1
    assert value("policy_router_attempts_total", key="team", route="openai/cloud", outcome="server_error") >= 1
    assert value("policy_router_refusals_total", key="team", group="unknown", reason="model_not_found") >= 1
    assert value("policy_router_spend_total", key="team", route="openai/local", currency="USD") > 0
    assert value("policy_router_request_seconds_count", key="team", group="smart") >= 1
    for secret in (TEAM, ADMIN, "a secret prompt", "made-up-model-name"):
        assert secret not in scrape.text
    denied = httpx.get(f"{server[: -len('/v1')]}/metrics", headers={"Authorization": f"Bearer {TEAM}"}, timeout=10)
    assert denied.status_code == 403


def test_node_clients_package_is_pinned() -> None:
    """The Node SDK the tests run is the lock file's, installed by `npm ci`."""
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/openai"]["version"] == json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["openai"]
    assert Path(NODE_DIR / "client.mjs").is_file()
