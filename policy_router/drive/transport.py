"""The only module that imports LiteLLM: calls, model info, and what an exception means.

Every call goes out with LiteLLM's own retries and fallbacks off (`num_retries=0`,
`max_retries=0`, never `fallbacks`), so one attempt in a journey is one request on the
wire. Exceptions are classified from the HTTP status and the provider's error body, not
only from LiteLLM's class: LiteLLM maps some errors by message text (a refused connection
arrives as `InternalServerError` 500 "Connection error.", a 403 as plain `APIError`, and
OpenAI's real content-policy 400 as a plain `BadRequestError`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import httpx
import litellm
import openai

from ..ground.errors import ConfigError, PolicyRouterError
from ..ground.outcome import Fault, FaultKind
from ..ground.route import Route
from ..policies.prices import Usage

if TYPE_CHECKING:
    from ..core.plan import Plan, Send

__all__ = [
    "acall",
    "call",
    "check_globals",
    "cost_map_entry",
    "cost_map_rows",
    "deprecation_date",
    "count_tokens",
    "litellm_kwargs",
    "litellm_version",
    "missing_credentials",
    "ping",
    "usage_of",
    "is_hollow_first_chunk",
    "classify",
    "model_info",
    "silence_banner",
    "stream_cut_error",
]


def silence_banner() -> None:
    """Stop LiteLLM printing its "Give Feedback / Get Help" banner to stdout on failures.

    This is the one LiteLLM global the package writes, and only when a `Router` is built
    with `quiet_litellm=True` (the default): a router fails over on purpose, and would
    otherwise print the banner on every skip. Pass `quiet_litellm=False` to keep it.
    """
    litellm.suppress_debug_info = True


def check_globals() -> None:
    """Refuse to route while a LiteLLM global would defeat the router's own decisions.

    A global `litellm.num_retries` overrides a per-call `num_retries=0` (LiteLLM reads
    `kwargs.get("num_retries") or litellm.num_retries`), and a global
    `litellm.model_fallbacks` cannot be overridden per call. They are the user's settings,
    so they are reported rather than reset.
    """
    if litellm.num_retries:
        raise ConfigError(
            f"litellm.num_retries is set to {litellm.num_retries!r}: it overrides the router's "
            "one-request-per-attempt calls. Set litellm.num_retries = None and use "
            "Router(retry=Retry(...)) for retries."
        )
    if getattr(litellm, "model_fallbacks", None):
        raise ConfigError(
            "litellm.model_fallbacks is set: LiteLLM would fall back on its own, behind the "
            "router's floor and budget. Set litellm.model_fallbacks = None and list the "
            "fallback routes in one group instead."
        )


def model_info(route: Route) -> tuple[dict[str, Any] | None, bool]:
    """LiteLLM's model info for the route (None when unknown), and native streaming."""
    provider = route.kwargs.get("custom_llm_provider") or route.provider or None
    try:
        info = litellm.get_model_info(route.model, custom_llm_provider=provider)
    except Exception:
        # Unknown to LiteLLM's map: the caller decides what an unknown model means.
        return None, False
    try:
        streams = bool(
            litellm.utils.supports_native_streaming(
                route.model, info.get("litellm_provider") or provider
            )
        )
    except Exception:
        streams = False
    return dict(info), streams


def listed_provider(route: Route) -> str | None:
    """The provider LiteLLM lists the route's model under, when it knows the model as a
    hosted one (`openai` for `openai/gpt-4o`); None for a model it does not list."""
    info, _ = model_info(route)
    if info is None:
        return None
    return str(info.get("litellm_provider") or route.provider or "unknown")


def response_format_schema(response_format: Any) -> Any:
    """What LiteLLM sends for a `response_format` (a pydantic class becomes its JSON
    schema, as `litellm.completion` derives it)."""
    from litellm.llms.base_llm.base_utils import type_to_response_format_param

    return type_to_response_format_param(response_format)


def count_tokens(kwargs: Mapping[str, Any], texts: tuple[str, ...] = ("messages",)) -> int:
    """The prompt's tokens by LiteLLM's token counter with its default tokenizer.

    The same count serves every route of a request, so routes are compared on one measure.
    No model name is passed on purpose: for some names (`llama-3`, `llama-2`, `command-r`,
    `replicate`) LiteLLM tries to download a tokenizer from Hugging Face, which blocked
    23 s here with no network. The default tokenizer is bundled and never downloads.
    `texts` names the prompt's keyword arguments (`messages`, or `input`, `prompt`, ...).
    """
    try:
        if texts == ("messages",):
            return int(
                litellm.token_counter(
                    messages=kwargs.get("messages") or [], tools=kwargs.get("tools") or None
                )
            )
        text = " ".join(
            json.dumps(kwargs[t], default=str) if not isinstance(kwargs[t], str) else kwargs[t]
            for t in texts
            if kwargs.get(t) is not None
        )
        return int(litellm.token_counter(text=text))
    except Exception:
        # Odd content LiteLLM cannot count: the byte length over four is a fair estimate.
        return len(json.dumps([kwargs.get(t) for t in texts], default=str)) // 4


def _field(obj: Any, name: str) -> Any:
    """An attribute that may not be there, without paying for a missing one: LiteLLM's
    pydantic objects answer a missing attribute through `__getattr__` and an exception."""
    if obj is None:
        return None
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict):
        if name in fields:
            return fields[name]
        extra = fields.get("__pydantic_extra__") or getattr(obj, "__pydantic_extra__", None)
        return extra.get(name) if isinstance(extra, dict) else None
    return getattr(obj, name, None)


def usage_of(response: Any) -> Usage | None:
    """The usage a response or final stream chunk reports, or None when it has none."""
    usage = _field(response, "usage")
    if usage is None:
        return None
    prompt = _field(usage, "prompt_tokens")
    completion = _field(usage, "completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = _field(usage, "prompt_tokens_details")
    out = _field(usage, "completion_tokens_details")
    if details is None and out is None and not _field(usage, "cache_creation_input_tokens"):
        return Usage(prompt, completion)  # no cache or reasoning detail: the common reply
    cached = _field(details, "cached_tokens") or _field(usage, "cache_read_input_tokens")
    written = _field(usage, "cache_creation_input_tokens") or _field(
        details, "cache_creation_tokens"
    )
    hour = _field(_field(details, "cache_creation_token_details"), "ephemeral_1h_input_tokens")
    reasoning = _field(out, "reasoning_tokens")
    return Usage(
        prompt,
        completion,
        int(cached or 0),
        int(written or 0),
        int(reasoning or 0),
        hour if isinstance(hour, int) else 0,
    )


@lru_cache(maxsize=1)
def bundled_cost_map() -> Mapping[str, Any]:
    """LiteLLM's price map as the installed litellm package ships it: the rates
    `litellm_version()` names, whether or not LiteLLM fetched a newer map when it was
    imported (it does unless `LITELLM_LOCAL_MODEL_COST_MAP=True`). Read once."""
    from importlib.resources import files

    try:
        shipped = files("litellm").joinpath("model_prices_and_context_window_backup.json")
        return cast(Mapping[str, Any], json.loads(shipped.read_bytes()))
    except (OSError, ValueError):  # pragma: no cover - a litellm that ships no backup map
        return litellm.model_cost


def cost_map_entry(model: str, provider: str | None = None) -> tuple[str, dict[str, Any]]:
    """LiteLLM's cost-map entry for `model`, as `(row key, entry)`: the row key is the
    LiteLLM model string to price (`gemini/gemini-2.5-pro`), the entry its per-token floats.

    The provider is checked: `gemini-2.5-pro` with provider "gemini" is Google AI Studio's
    row (`gemini/gemini-2.5-pro`), not the bare key's, which is Vertex's. A bare name with
    no provider takes the map's own and says so in the row key. A model the map does not
    know raises `ConfigError` naming close matches. Read from `bundled_cost_map()`.
    """
    cost_map = bundled_cost_map()
    if "/" in model and provider is None:
        provider, name = model.split("/", 1)
    else:
        name = model
    keys = [f"{provider}/{name}", name] if provider else [name]
    for key in keys:
        entry = cost_map.get(key)
        if not isinstance(entry, dict) or entry.get("input_cost_per_token") is None:
            continue
        listed = str(entry.get("litellm_provider") or "")
        if provider is None or provider in listed.split("-") or listed.startswith(provider):
            owner = provider or listed.split("-language-models")[0]
            return f"{owner}/{name}", dict(entry)
    import difflib

    pool = [
        f"{provider}/{k.split('/', 1)[-1]}" if provider else k
        for k, v in cost_map.items()
        if isinstance(v, dict)
        and (provider is None or str(v.get("litellm_provider") or "").startswith(provider))
    ]
    target = f"{provider}/{name}" if provider else name
    close = difflib.get_close_matches(target, sorted(set(pool)), n=5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    where = f" for provider {provider!r}" if provider else ""
    raise ConfigError(f"LiteLLM's cost map has no prices for {name!r}{where}{hint}")


def cost_map_rows(models: list[str]) -> dict[str, dict[str, Any]]:
    """LiteLLM's cost-map entries for `models` (its per-token floats, as it keeps them),
    by each model's row key (see `cost_map_entry`)."""
    return dict(cost_map_entry(m) for m in models)


def deprecation_date(route: Route) -> str | None:
    """The date LiteLLM's map gives for the model's deprecation, if any (ISO text).

    Read from the shipped map itself: `litellm.get_model_info` leaves the field out
    (1.110.2).
    """
    try:
        _, entry = cost_map_entry(route.model)
    except ConfigError:
        return None
    value = entry.get("deprecation_date")
    return str(value) if value else None


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


def litellm_kwargs() -> frozenset[str]:
    """Every keyword argument `litellm.completion` understands, for config validation."""
    global _LITELLM_KWARGS
    if _LITELLM_KWARGS is None:
        import inspect

        from litellm.types.utils import all_litellm_params

        names = set(inspect.signature(litellm.completion).parameters) | set(all_litellm_params)
        _LITELLM_KWARGS = frozenset(names - {"model", "messages", "kwargs"})
    return _LITELLM_KWARGS


_LITELLM_KWARGS: frozenset[str] | None = None


def litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "failure_callback",
    "input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


class _NoRetries(int):
    """Zero retries that survive LiteLLM's `max_retries or litellm.DEFAULT_MAX_RETRIES`.

    LiteLLM's OpenAI embedding path (litellm 1.110.2, `llms/openai/openai.py`) reads an
    explicit `max_retries=0` as "unset" because 0 is falsy, and the OpenAI client then
    retried twice: three requests per failed embedding, measured here. This zero is truthy,
    so it reaches the client, which counts it as the 0 it equals.
    """

    def __bool__(self) -> bool:
        return True


NO_RETRIES = _NoRetries(0)


def _kwargs(
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    request_id: str = "",
    attempt: int = 0,
) -> dict[str, Any]:
    # The route's kwargs are defaults and the call's win, as with LiteLLM's Router
    # (`litellm_params` first, then the call's own). A caller cannot override where the
    # call goes or its credentials: `validate.REFUSED_KWARGS` refuses those.
    merged = {**route.kwargs, **kwargs}
    merged.update(model=route.model, num_retries=0, max_retries=NO_RETRIES)
    if timeout is not None:
        # The deadline's length caps each attempt's timeout (the route's, the call's, or
        # one made of it).
        given = merged.get("timeout")
        if isinstance(given, httpx.Timeout):
            merged["timeout"] = httpx.Timeout(
                **{
                    part: (timeout if (v := getattr(given, part)) is None else min(v, timeout))
                    for part in ("connect", "read", "write", "pool")
                }
            )
        elif isinstance(given, int | float) and not isinstance(given, bool):
            merged["timeout"] = min(given, timeout)
        else:
            merged["timeout"] = timeout
    # Label the call for the user's own LiteLLM callbacks, which see every attempt: the
    # route, the group, the request's id (its journey's) and which attempt of it this is.
    # Only when some are registered: LiteLLM spends ~0.17 ms a call (3%) handling metadata.
    if (
        litellm.callbacks
        or litellm.success_callback
        or litellm.failure_callback
        or litellm.input_callback
        or litellm._async_success_callback
        or litellm._async_failure_callback
    ):
        metadata = dict(merged.get("metadata") or {})
        metadata["policy_router"] = {
            "route": route.name,
            "group": group,
            "request_id": request_id,
            "attempt": attempt,
        }
        merged["metadata"] = metadata
    return merged


def call(
    function: str,
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    *,
    request_id: str = "",
    attempt: int = 0,
) -> Any:
    """One request through LiteLLM's `function` (`completion`, `embedding`, `responses`,
    `text_completion`): its own response object or stream.

    `timeout`, when given, caps the call's own (see `_kwargs`). `request_id` and `attempt`
    label the call for LiteLLM's callbacks.
    """
    merged = _kwargs(route, kwargs, group, timeout, request_id, attempt)
    return getattr(litellm, function)(**merged)


async def acall(
    function: str,
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    *,
    request_id: str = "",
    attempt: int = 0,
) -> Any:
    """One request through LiteLLM's async `function` (`acompletion`, `aembedding`, ...)."""
    merged = _kwargs(route, kwargs, group, timeout, request_id, attempt)
    return await getattr(litellm, function)(**merged)


def stream_cut_error(route: Route, text: str) -> Exception:
    """The exception for a stream that ended without a finish reason.

    It is LiteLLM's own `MidStreamFallbackError`, the class LiteLLM raises when it notices
    the same thing itself, with the text received so far as `generated_content`.
    """
    return litellm.exceptions.MidStreamFallbackError(
        message="the stream ended without a finish reason: the reply was cut short",
        model=route.model,
        llm_provider=route.provider or "unknown",
        generated_content=text,
    )


def is_hollow_first_chunk(chunk: Any) -> bool:
    """True for a first chunk LiteLLM made up because the provider sent no chunk at all.

    Measured with litellm 1.110.2: a stream whose connection closes before any data yields
    one chunk with `finish_reason="stop"`, no role and no content, instead of an error. A
    real first chunk carries the assistant role or some content.
    """
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        if (
            getattr(delta, "role", None)
            or getattr(delta, "content", None)
            or getattr(delta, "tool_calls", None)
        ):
            return False
    return True


_ACCESS_STATUSES = {401, 402, 403, 404}
_REQUEST_STATUSES = {400, 413, 422}


def classify(exc: BaseException) -> Fault | None:
    """What a LiteLLM exception is about, or None when it is not a provider outcome.

    None means the exception is a bug or a misuse on this side (a `TypeError`, say) and is
    re-raised unchanged rather than treated as a reason to try the next route. A failure
    that never left this process is classified by what happened, not by LiteLLM's class
    (see `Fault.sent`).
    """
    if isinstance(exc, PolicyRouterError) or not isinstance(
        exc, openai.APIError | litellm.exceptions.APIError | litellm.exceptions.APIConnectionError
    ):
        return None
    local = _never_sent(exc)
    if local is not None:
        return local
    status = _status(exc)
    message = _provider_text(str(getattr(exc, "message", "") or exc))
    retry_after = _retry_after(exc)

    def fault(kind: FaultKind) -> Fault:
        return Fault(kind, status, message, retry_after)

    if isinstance(exc, litellm.exceptions.UnsupportedParamsError):
        # LiteLLM's own parameter check, made before anything is sent.
        return Fault(FaultKind.BAD_REQUEST, status, message, sent=False)
    if isinstance(exc, litellm.exceptions.MidStreamFallbackError):
        return fault(FaultKind.STREAM_CUT)
    if _is_refusal(exc, message):
        return fault(FaultKind.REFUSED)
    if isinstance(exc, litellm.exceptions.ContextWindowExceededError):
        return fault(FaultKind.BAD_REQUEST)
    if isinstance(exc, litellm.exceptions.Timeout) or status in (408, 504):
        return fault(FaultKind.TIMEOUT)
    if status == 429 or isinstance(exc, litellm.exceptions.RateLimitError):
        return fault(FaultKind.RATE_LIMITED)
    if status in _ACCESS_STATUSES or isinstance(
        exc,
        litellm.exceptions.AuthenticationError
        | litellm.exceptions.PermissionDeniedError
        | litellm.exceptions.NotFoundError,
    ):
        return fault(FaultKind.ACCESS)
    if status in _REQUEST_STATUSES or isinstance(
        exc, litellm.exceptions.BadRequestError | litellm.exceptions.UnprocessableEntityError
    ):
        return fault(FaultKind.BAD_REQUEST)
    if _is_connection(exc):
        return fault(FaultKind.CONNECTION)
    return fault(FaultKind.SERVER_ERROR)


# Python errors raised while a request is built, encoded or configured, before any byte
# leaves: LiteLLM wraps them as provider errors (a 500 around a UnicodeEncodeError, an
# APIConnectionError around a TypeError), measured with litellm 1.110.2.
_LOCAL_ERRORS = (UnicodeError, TypeError, OverflowError, ValueError)


def _never_sent(exc: BaseException) -> Fault | None:
    """A Fault with `sent=False` when `exc` wraps an error raised before sending."""
    cause: BaseException | None = exc
    for _ in range(10):
        nested = cause.__cause__ or cause.__context__ if cause is not None else None
        if nested is None:
            break
        cause = nested
    if cause is None or cause is exc:
        return None
    text = f"{type(cause).__name__}: {str(cause)[:300]}"
    if type(cause) is openai.OpenAIError:
        # The OpenAI client refused to be built: a missing key, a bad option of the route.
        return Fault(FaultKind.ACCESS, None, text, sent=False)
    if (
        isinstance(cause, _LOCAL_ERRORS)
        and not isinstance(cause, json.JSONDecodeError)
        and not _while_reading_a_response(cause)
    ):
        return Fault(FaultKind.BAD_REQUEST, None, text, sent=False, local=text)
    return None


def _while_reading_a_response(error: BaseException) -> bool:
    # A ValueError or TypeError raised while turning a provider's reply into a response
    # happened after sending; its frames say so (transform_response, ..._response_object).
    tb = error.__traceback__
    while tb is not None:
        if "response" in tb.tb_frame.f_code.co_name:
            return True
        tb = tb.tb_next
    return False


# LiteLLM prefixes the provider's text with its own class names, sometimes twice:
# "litellm.exceptions.RateLimitError: RateLimitError: OpenAIException - Too many requests".
_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout)(?: Error)?(?: - |: ))+")


def _provider_text(message: str) -> str:
    text = _PREFIX.sub("", message.strip())
    return text.split(" Original exception:", 1)[0].strip() or message


def _status(exc: BaseException) -> int | None:
    # The response's own status beats LiteLLM's, which is rewritten by message text.
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and status >= 400:
        return status
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    headers: Any = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = None
    try:
        value = headers.get("retry-after")
    except AttributeError:
        value = None
    if value is None:
        extra = getattr(exc, "litellm_response_headers", None) or {}
        try:
            value = extra.get("retry-after")
        except AttributeError:
            value = None
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date: rare from LLM providers, and not trusted blind
    return seconds if seconds is not None and seconds >= 0 else None


def _is_refusal(exc: BaseException, message: str) -> bool:
    if isinstance(exc, litellm.exceptions.ContentPolicyViolationError):
        return True
    body = getattr(exc, "body", None)
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    if isinstance(body, Mapping):
        error = body.get("error", body)
        code = error.get("code") if isinstance(error, Mapping) else None
        if code == "content_policy_violation" or code == "content_filter":
            return True
    return "content_policy_violation" in message or "content management policy" in message


def _is_connection(exc: BaseException) -> bool:
    if isinstance(exc, litellm.exceptions.APIConnectionError):
        return True
    if "Connection error" in str(exc):
        return True
    cause: BaseException | None = exc.__cause__ or exc.__context__
    seen = 0
    while cause is not None and seen < 8:
        name = type(cause).__name__
        if "Connect" in name or "RemoteProtocol" in name or "ReadError" in name:
            return True
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False


def send(function: str, kwargs: Mapping[str, Any], plan: Plan, sent: Send) -> Any:
    """`plan`'s request sent as `sent` says: to its route, within its timeout, labelled for
    LiteLLM's callbacks with the plan's group and id and the attempt's number."""
    return call(
        function,
        sent.route,
        kwargs,
        plan.group,
        sent.timeout,
        request_id=plan.id,
        attempt=sent.attempt,
    )


async def asend(function: str, kwargs: Mapping[str, Any], plan: Plan, sent: Send) -> Any:
    """The async twin of `send`."""
    return await acall(
        function,
        sent.route,
        kwargs,
        plan.group,
        sent.timeout,
        request_id=plan.id,
        attempt=sent.attempt,
    )
