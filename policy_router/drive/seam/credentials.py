"""Credentials before sending: what LiteLLM needs for a route and does not find, and one
cheap live request (`router.preflight()`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import litellm

from ...ground.outcome import Fault
from ...ground.route import Route
from .failures import classify
from .transport import call

__all__ = ['missing_credentials', 'ping']


# The route kwargs LiteLLM reads in place of an environment variable it reports missing
# (litellm.validate_environment names the variables only). Any *_API_KEY or *_TOKEN is
# satisfied by `api_key`, any *_API_BASE by `api_base`.
_SATISFIED_BY: Mapping[str, tuple[str, ...]] = {
    "AZURE_API_VERSION": ("api_version",),
    "AZURE_API_KEY": ("api_key", "azure_ad_token", "azure_ad_token_provider", "client_secret"),
    "AWS_ACCESS_KEY_ID": (
        "aws_access_key_id",
        "aws_profile_name",
        "aws_role_name",
        "aws_web_identity_token",
        "api_key",
    ),
    "AWS_SECRET_ACCESS_KEY": (
        "aws_secret_access_key",
        "aws_profile_name",
        "aws_role_name",
        "aws_web_identity_token",
        "api_key",
    ),
    "AWS_REGION_NAME": ("aws_region_name",),
    "VERTEXAI_PROJECT": ("vertex_project", "vertex_ai_project", "vertex_credentials"),
    "VERTEXAI_LOCATION": ("vertex_location", "vertex_ai_location"),
    "VERTEXAI_CREDENTIALS": ("vertex_credentials",),
}



# Reported missing by LiteLLM though the provider works without them.
_NOT_NEEDED = {"OLLAMA_API_BASE"}  # LiteLLM's default is http://localhost:11434



# Either of these environment variables is enough for Gemini (LiteLLM reports both).
_ALTERNATIVES = ({"GOOGLE_API_KEY", "GEMINI_API_KEY"},)



# Providers whose SDK finds credentials beyond the environment (a profile, an instance role,
# application default credentials): a variable missing there proves nothing.
_AMBIENT = {
    "bedrock": "boto3 may still find a profile, an SSO session or an instance role",
    "sagemaker": "boto3 may still find a profile, an SSO session or an instance role",
    "vertex_ai": "google-auth may still find application default credentials",
    "vertex_ai_beta": "google-auth may still find application default credentials",
}



def missing_credentials(route: Route) -> tuple[list[str], str]:
    """Environment variables LiteLLM needs for the route and finds neither in the
    environment nor on the route, and, when that proves nothing for certain, why.

    A credential the route carries counts under every name LiteLLM reads for its provider
    (Azure's `api_version`, Bedrock's `aws_*`, Vertex's `vertex_*`, ...). The second value
    is "" when the variables are surely needed, else the reason they may not be (the
    provider's SDK looks elsewhere too).
    """
    kwargs = route.kwargs
    try:
        found = litellm.validate_environment(
            model=route.model,
            api_key=kwargs.get("api_key"),
            api_base=kwargs.get("api_base") or kwargs.get("base_url"),
            api_version=kwargs.get("api_version"),
        )
    except Exception:
        return [], ""
    missing = []
    for name in (str(k) for k in found.get("missing_keys") or []):
        given = _SATISFIED_BY.get(name)
        if given is None:
            upper = name.upper()
            given = ("api_key",) if "KEY" in upper or "TOKEN" in upper else ()
            given += ("api_base", "base_url") if "BASE" in upper else ()
        if name not in _NOT_NEEDED and not any(kwargs.get(k) for k in given):
            missing.append(name)
    for either in _ALTERNATIVES:
        if either & set(missing) and any(os.environ.get(n) for n in either):
            missing = [m for m in missing if m not in either]
        elif either <= set(missing):
            missing = [m for m in missing if m not in either] + [" or ".join(sorted(either))]
    provider = str(kwargs.get("custom_llm_provider") or route.provider)
    return missing, _AMBIENT.get(provider, "") if missing else ""



def ping(route: Route, embedding: bool = False) -> Fault | None:
    """One cheap live request (one token of output, or one word embedded); None when it
    answered."""
    try:
        if embedding:
            call("embedding", route, {"input": ["ping"]}, "preflight", timeout=10.0)
        else:
            call(
                "completion",
                route,
                {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1},
                "preflight",
                timeout=10.0,
            )
    except Exception as exc:
        fault = classify(exc)
        if fault is None:
            raise
        return fault
    return None
