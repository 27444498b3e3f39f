"""Reach: where a route sends the request's data, and how that was decided.

The on-device floor trusts a route's reach, so an undeclared reach is inferred to fail
closed. A route is inferred on-device only when the host it really connects to is loopback
*and* what answers there is plausibly served on this machine:

- a local-serving provider (`ollama`, `lm_studio`, `llamafile`, `hosted_vllm`, ...), except
  the models such a daemon only relays to a cloud (Ollama's `...-cloud` models);
- a model LiteLLM does not know (`openai/my-llama` on `http://127.0.0.1:8080/v1`).

A model LiteLLM lists as a hosted vendor model (`openai/gpt-4o`) stays VENDOR even behind a
loopback `api_base`: `http://localhost:4000` is most often a LiteLLM proxy that forwards to
the vendor. A provider's *name* alone never proves locality, and a declared reach always wins.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from enum import StrEnum
from urllib.parse import urlsplit

__all__ = ["LOCAL_SERVING", "Reach", "infer", "is_loopback"]


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
    known_hosted: Callable[[], str | None],
) -> tuple[Reach, str]:
    """The reach of an undeclared route, and one sentence saying how it was decided.

    `known_hosted()` is asked only for a loopback route outside the local-serving providers:
    it returns the provider LiteLLM lists the model under when it knows the model, else None.
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
    listed = known_hosted()
    if listed is not None:
        return Reach.VENDOR, (
            f"inferred: LiteLLM lists {model} as a hosted {listed} model, so {where} is taken "
            "for a proxy to the vendor; declare reach='on_device' if it is served here"
        )
    return Reach.ON_DEVICE, f"inferred: a model LiteLLM does not list, served on {where}"
