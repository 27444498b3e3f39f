"""Reach: where a route sends the request's data, and how that was decided.

The on-device floor trusts a route's reach, so an undeclared reach is inferred from an
allow-list and fails closed: a route is inferred on-device only when the host it really
connects to is loopback *and* one of these serves there:

- a local-serving provider (`ollama`, `lm_studio`, `llamafile`, `hosted_vllm`, ...), except
  the models such a daemon only relays to a cloud (Ollama's `...-cloud` models);
- an OpenAI-compatible server (`openai/...`, `custom_openai/...`) whose model LiteLLM does not
  list under any name it goes by, its `base_model` included (`openai/my-llama` on
  `http://127.0.0.1:8080/v1`).

Everything else is VENDOR: a model LiteLLM lists as a hosted one (`openai/gpt-4o` behind
`http://localhost:4000` is most often a LiteLLM proxy that forwards to the vendor), a
forwarder (`litellm_proxy/...`, `openrouter/...`), a vendor-only provider (`azure/...`,
`bedrock/...`) wherever it listens, and every provider prefix not on these lists. A
declared reach always wins.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from enum import StrEnum
from urllib.parse import urlsplit

from . import catalog

__all__ = ["LOCAL_SERVING", "OPENAI_COMPATIBLE", "Reach", "infer", "is_loopback"]


class Reach(StrEnum):
    """Where a route sends the request's data."""

    ON_DEVICE = "on_device"
    """Served on this machine or the caller's own network: trusted with private data."""
    VENDOR = "vendor"
    """Served by someone else: never used under the on-device floor."""


# LiteLLM providers whose server runs where you start it. With no api_base, LiteLLM uses a
# loopback default for some of them (the others need an api_base to work at all).
LOCAL_SERVING = frozenset(
    {
        "ollama",
        "ollama_chat",
        "lm_studio",
        "llamafile",
        "hosted_vllm",
        "vllm",
        "xinference",
        "lemonade",
        "docker_model_runner",
        "triton",
        "oobabooga",
        "infinity",
    }
)
# Providers that speak the OpenAI protocol to whatever server `api_base` names: on loopback
# that is a local server unless the model is one LiteLLM lists as a vendor's.
OPENAI_COMPATIBLE = frozenset({"openai", "custom_openai", "openai_like", "text-completion-openai"})
_LOCAL_DEFAULT_BASES = {
    "ollama": "http://localhost:11434",
    "ollama_chat": "http://localhost:11434",
    "llamafile": "http://127.0.0.1:8080/v1",
}


def is_loopback(host: str | None) -> bool:
    """True for `localhost`, `*.localhost`, 127.0.0.0/8 and ::1."""
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(api_base: str) -> str | None:
    url = api_base if "://" in api_base else f"http://{api_base}"
    return urlsplit(url).hostname


def _relayed_to_cloud(model: str) -> bool:
    # Ollama serves `gpt-oss:120b-cloud` by forwarding the prompt to ollama.com.
    tag = model.rsplit(":", 1)[-1] if ":" in model else ""
    return tag == "cloud" or tag.endswith("-cloud")


def infer(
    model: str,
    provider: str,
    api_base: str | None,
    also_known_as: Iterable[str] = (),
) -> tuple[Reach, str]:
    """The reach of an undeclared route, and one sentence saying which rule decided it.

    `provider` is the LiteLLM provider the call goes through (the model's prefix, or the
    route's `custom_llm_provider`); `also_known_as` names the model goes by besides its
    own (a `base_model`), checked against LiteLLM's map like the model itself.
    """
    base = api_base if api_base is not None else _LOCAL_DEFAULT_BASES.get(provider)
    if base is None:
        return Reach.VENDOR, "inferred: no api_base, so the provider's own hosted endpoint"
    host = _host_of(base)
    if not is_loopback(host):
        return Reach.VENDOR, f"inferred: api_base host {host} is not loopback"
    where = f"{host} (loopback)"
    if provider in LOCAL_SERVING:
        if _relayed_to_cloud(model):
            return Reach.VENDOR, (
                f"inferred: {model} is a cloud model a local {provider} daemon relays to its "
                "vendor; declare reach='on_device' only if it is really served here"
            )
        return Reach.ON_DEVICE, f"inferred: {provider} serves on {where}"
    if provider not in OPENAI_COMPATIBLE:
        return Reach.VENDOR, (
            f"inferred: provider {provider or '(none)'!r} is not one that serves models itself, "
            f"so {where} is taken for a proxy that forwards to a vendor; declare reach='on_device' "
            "if it is served here"
        )
    name = model.split("/", 1)[1] if "/" in model else model
    names = (model, name, *also_known_as)
    listed = catalog.listed(names)
    if listed is not None:
        return Reach.VENDOR, (
            f"inferred: LiteLLM lists {model} as a hosted {listed} model, so {where} is taken "
            "for a proxy to the vendor; declare reach='on_device' if it is served here"
        )
    return Reach.ON_DEVICE, (
        f"inferred: an OpenAI-compatible server on {where}, for a model LiteLLM does not list"
    )
