"""The OpenTelemetry GenAI semantic conventions, as this package maps onto them: operation
names, well-known provider names, and which request settings become which attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["OPERATIONS", "PROVIDERS", "SETTINGS", "settings_attributes"]


OPERATIONS = {
    "chat": "chat",
    "responses": "chat",
    "embedding": "embeddings",
    "completion": "text_completion",
}



# LiteLLM's provider names to the conventions' well-known `gen_ai.provider.name` values.
PROVIDERS = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "sagemaker": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_text": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}



# The call's settings as the conventions' request attributes.
SETTINGS = {
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "stop": "gen_ai.request.stop_sequences",
}



def settings_attributes(settings: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        name = SETTINGS.get(key)
        if name is None:
            continue
        if key == "stop":
            value = [value] if isinstance(value, str) else [str(v) for v in value]
        if isinstance(value, bool | int | float | str | list):
            out[name] = value
    return out
