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
import os
from collections.abc import Iterable, Mapping
from enum import StrEnum
from urllib.parse import urlsplit

from . import catalog

__all__ = [
    "LOCAL_SERVING",
    "OPENAI_COMPATIBLE",
    "Reach",
    "base_variables",
    "host_of",
    "infer",
    "is_loopback",
    "proxy_for",
]


class Reach(StrEnum):
    """Where a route sends the request's data: `ON_DEVICE` (this machine, or a host you
    declared yours) or `VENDOR`. A request with `on_device=True` is sent only to on-device
    routes. Undeclared, a route's reach is inferred and fails closed: what is not surely
    local is a vendor's."""

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


def host_of(api_base: str) -> str | None:
    """The host a base URL connects to (`127.0.0.1` of `http://127.0.0.1:8080/v1`)."""
    url = api_base if "://" in api_base else f"http://{api_base}"
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


_host_of = host_of


def base_variables(provider: str) -> tuple[str, ...]:
    """The environment variables LiteLLM reads for a provider's base URL when a route names
    none: `{PROVIDER}_API_BASE`, the convention of its provider code (`OLLAMA_API_BASE`,
    `LLAMAFILE_API_BASE`, `HOSTED_VLLM_API_BASE`), with `ollama_chat` reading Ollama's."""
    names = {f"{provider.upper()}_API_BASE"}
    if provider.startswith("ollama"):
        names.add("OLLAMA_API_BASE")
    return tuple(sorted(names))


# The proxy variables an HTTP client reads for a URL of each scheme, in both cases: httpx
# reads them through urllib's `getproxies()` and adds ALL_PROXY; aiohttp reads http/https.
_PROXY_VARIABLES = {
    "http": ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
    "https": ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
}


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The proxy variable that would carry a request to `url`, and its value, or None.

    Read as the HTTP clients LiteLLM uses read the environment (httpx and aiohttp, each
    with its own reading of `NO_PROXY`), on the safe side of both: a URL is taken to go
    direct only when `NO_PROXY` exempts its host under both readings (urllib's, which
    aiohttp uses, knows no CIDR ranges; httpx's does), so a proxy either client would use
    is the one returned. Loopback targets are not exempt unless `NO_PROXY` names them.
    """
    env = os.environ if environ is None else environ
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    for name in _PROXY_VARIABLES.get(scheme, ("all_proxy", "ALL_PROXY")):
        value = env.get(name)
        if value and value.strip():
            if _exempt(host, parts.port, env):
                return None
            return name, value.strip()
    return None


def _exempt(host: str, port: int | None, env: Mapping[str, str]) -> bool:
    listed = env.get("no_proxy") or env.get("NO_PROXY") or ""
    entries = [e.strip().lower() for e in listed.replace(";", ",").split(",") if e.strip()]
    if "*" in entries:
        return True
    return any(_matches(host, port, entry) for entry in entries)


def _matches(host: str, port: int | None, entry: str) -> bool:
    """Whether both readings of one NO_PROXY entry exempt `host` (see `proxy_for`)."""
    if "://" in entry:
        return False  # a scheme-bound entry: httpx only; urllib does not read it
    name, _, entry_port = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
    if entry_port and (port is None or entry_port != str(port)):
        return False
    name = name.lstrip(".")
    if not name or "/" in name:
        return False  # a CIDR range: httpx only
    return host == name or host.endswith("." + name)


def _relayed_to_cloud(model: str) -> bool:
    # Ollama serves `gpt-oss:120b-cloud` by forwarding the prompt to ollama.com.
    tag = model.rsplit(":", 1)[-1] if ":" in model else ""
    return tag == "cloud" or tag.endswith("-cloud")


def infer(
    model: str,
    provider: str,
    api_base: str | None,
    also_known_as: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> tuple[Reach, str]:
    """The reach of an undeclared route, and one sentence saying which rule decided it.

    `provider` is the LiteLLM provider the call goes through (the model's prefix, or the
    route's `custom_llm_provider`); `also_known_as` names the model goes by besides its
    own (a `base_model`), checked against LiteLLM's map like the model itself. A
    local-serving provider without an `api_base` connects where LiteLLM's environment
    variable for it says (`OLLAMA_API_BASE`, ...), else to its default; the variable is
    read now, and the floor checks the URL LiteLLM really uses again at every attempt.
    """
    base, where_from = api_base, "api_base"
    if base is None and provider in LOCAL_SERVING:
        env = os.environ if environ is None else environ
        for name in base_variables(provider):
            if env.get(name):
                base, where_from = env[name], name
                break
        else:
            base, where_from = _LOCAL_DEFAULT_BASES.get(provider), "default base"
    if base is None:
        return Reach.VENDOR, "inferred: no api_base, so the provider's own hosted endpoint"
    host = _host_of(base)
    if not is_loopback(host):
        return Reach.VENDOR, f"inferred: {where_from} host {host} is not loopback"
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
