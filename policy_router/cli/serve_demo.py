"""`policy-router serve --demo`: the server on the demo's routes, with no provider key.

A newcomer points any client at it (curl, the openai and anthropic SDKs, the Node SDK,
Claude Code) before writing a policy file: the demo's group `smart` (three routes on an
embedded FakeProvider, cheapest first, one of them on this machine) and `emb` for
embeddings, a budget, and one printed demo key. Every answer comes from FakeProvider on
loopback: nothing leaves the machine, nothing is billed. Like `demo`, a module of the
product that imports `testing`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..config.keys import digest
from ..testing import FakeProvider, Reply

__all__ = ["DEMO_ADMIN_KEY", "DEMO_KEY", "demo_policy", "serve_demo"]

DEMO_KEY = "sk-policy-router-demo"
"""The demo server's API key (a demo's, printed: never use it for a real server)."""

DEMO_ADMIN_KEY = "sk-policy-router-demo-admin"
"""The demo server's admin key: `/metrics`, `/v1/spend` of every scope, `/v1/budgets`."""

# Dollars per million tokens (input, output), as the demo's.
_PRICES = {"local-llama": ("0", "0"), "vendor-a": ("0.15", "0.60"), "vendor-b": ("2.50", "10.00"), "embedder": ("0.02", "0")}


# FakeProvider takes any key; LiteLLM's OpenAI path wants one, read as a policy file's is.
_PROVIDER_KEY = "POLICY_ROUTER_DEMO_PROVIDER_KEY"


def demo_policy(base_url: str) -> dict[str, Any]:
    """The demo server's policy: `smart` and `emb` on the FakeProvider at `base_url`, a
    $1.00 budget, the demo key and admin key."""

    def route(model: str, reach: str, **capabilities: bool) -> dict[str, Any]:
        return {
            "model": f"openai/{model}", "api_base": base_url, "api_key": f"os.environ/{_PROVIDER_KEY}",
            "reach": reach, "prices": "demo", "capabilities": capabilities,
        }

    every = {"tools": True, "streaming": True, "images": True, "structured_output": True}
    return {
        "name": "demo",
        "groups": {
            "smart": {"order": "cheapest", "routes": [
                route("vendor-b", "vendor", **every), route("vendor-a", "vendor", **every),
                route("local-llama", "on_device", streaming=True),
            ]},
            "emb": {"routes": [route("embedder", "vendor", embedding=True)]},
        },
        "price_tables": {"demo": {"currency": "USD", "as_of": "2026-11-01", "source": "demo", "models": {
            f"openai/{m}": {"input": i, "output": o} for m, (i, o) in _PRICES.items()}}},
        "budget": {"cap": "1.00"},
        "server": {
            "keys": {"demo": {"key_sha256": digest(DEMO_KEY)}},
            "admin_keys": {"demo-admin": {"key_sha256": digest(DEMO_ADMIN_KEY)}},
        },
    }


def serve_demo(host: str, port: int, out: Callable[[str], None], *, workers: int | None = None) -> None:
    """Serve the demo's routes on `host:port` until SIGTERM or Ctrl-C, after printing the
    key and how each client is pointed at it. Its state is in this process: one worker."""
    from ..server import serve

    os.environ.setdefault(_PROVIDER_KEY, "sk-fake-demo")
    with FakeProvider(default=Reply("Hello from the policy-router demo (FakeProvider).")) as fake:
        def ready(url: str) -> None:
            root = url[: -len("/v1")]
            out(
                f"policy-router: serving the demo on {url} (routes on FakeProvider at {fake.base_url}; no provider key)\n"
                f"  API key:   {DEMO_KEY}\n"
                f"  admin key: {DEMO_ADMIN_KEY}   (/metrics, /v1/spend, /v1/budgets)\n"
                f"  groups:    smart (chat, tools, streams), emb (embeddings)\n"
                f"  curl:      curl {url}/chat/completions -H 'Authorization: Bearer {DEMO_KEY}' "
                "-H 'content-type: application/json' -d '{\"model\": \"smart\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'\n"
                f"  OpenAI:    OPENAI_BASE_URL={url} OPENAI_API_KEY={DEMO_KEY}\n"
                f"  Anthropic: ANTHROPIC_BASE_URL={root} ANTHROPIC_API_KEY={DEMO_KEY} ANTHROPIC_MODEL=smart"
            )

        serve(demo_policy(fake.base_url), host=host, port=port, on_ready=ready, workers=workers)
