"""What a LiteLLM exception is about: the provider, the route's configuration, the
request, the work, or nothing at all because it never left this process.

Exceptions are classified from the HTTP status and the provider's error body, not only from
LiteLLM's class: LiteLLM maps some errors by message text (a refused connection arrives as
`InternalServerError` 500 "Connection error.", a 403 as plain `APIError`, and OpenAI's real
content-policy 400 as a plain `BadRequestError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx
import litellm
import openai

from ...ground.errors import PolicyRouterError, ResponseFailedError
from ...ground.outcome import (
    RETRY_AFTER_CAP,
    Fault,
    FaultKind,
    OffDeviceConnection,
    Wire,
    WireRefusal,
)
from . import raised, resets

__all__ = ['RETRY_AFTER_CAP', 'classify']


_ACCESS_STATUSES = {401, 402, 403, 404}


_REQUEST_STATUSES = {400, 413, 422}


def classify(exc: BaseException, wire: Wire | None = None) -> Fault | None:
    """What a LiteLLM exception is about, or None when it is not a provider outcome.

    None means the exception is a bug or a misuse on this side (a `TypeError`, say) and is
    re-raised unchanged rather than treated as a reason to try the next route.

    A failure counts as sent only on evidence that the request left the process: LiteLLM
    logged it as handed to the provider (`wire.left`), or the exception's chain holds the
    HTTP client's own error (a status, a refused or timed-out connection). Every other
    failure is local (`Fault.sent` False), whatever LiteLLM's class says: about the route
    when its client, SDK or credentials could not be had, else about the request.
    """
    if isinstance(exc, WireRefusal):
        return exc.fault  # stopped at the wire, before the HTTP client was called
    guarded = next((e for e in _chain(exc) if isinstance(e, OffDeviceConnection)), None)
    if guarded is not None:  # the floor's guard refused the connection: nothing was sent
        return Fault(FaultKind.ACCESS, None, str(guarded), sent=False)
    if isinstance(exc, ResponseFailedError):
        # The provider answered 200 and then said, in the stream, that the answer failed:
        # its code says whether about itself (the next route is asked) or about the request.
        return Fault(_failed_kind(exc.code), exc.status_code, str(exc), billed=True)
    if isinstance(exc, PolicyRouterError) or not isinstance(
        exc, openai.APIError | litellm.exceptions.APIError | litellm.exceptions.APIConnectionError
    ):
        return None
    local = _never_sent(exc)
    if local is not None:
        return local
    fault = _classified(exc)
    if not fault.sent:
        return fault
    if _refused_locally(exc):
        # The HTTP client refused to write what it was given (a header with CR/LF in it):
        # nothing reached the provider, whatever LiteLLM logged before.
        return _not_sent(exc, fault)
    if wire is not None and fault.kind is not FaultKind.STREAM_CUT and (
        wire.mocked or not (wire.left or _on_the_network(exc))
    ):
        return _not_sent(exc, fault)
    return _with_billing(exc, fault)


# The codes a Responses `response.failed`/`error` event gives (OpenAI's `ResponseError`
# codes): these are about the request, and another model would fail alike. An unknown code
# is taken as the provider's fault, as an unknown 5xx is: the next route is asked.
_REQUEST_CODES = frozenset({
    "invalid_prompt", "invalid_request_error", "invalid_image", "invalid_image_format",
    "invalid_base64_image", "invalid_image_url", "image_too_large", "image_too_small",
    "image_parse_error", "invalid_image_mode", "image_file_too_large",
    "unsupported_image_media_type", "empty_image_file", "failed_to_download_image",
    "image_file_not_found",
})
_REFUSAL_CODES = frozenset({"image_content_policy_violation", "content_policy_violation"})


def _failed_kind(code: str | None) -> FaultKind:
    if code in _REFUSAL_CODES:
        return FaultKind.REFUSED
    if code in _REQUEST_CODES:
        return FaultKind.BAD_REQUEST
    if code == "context_length_exceeded":
        return FaultKind.TOO_LONG
    if code == "rate_limit_exceeded":
        return FaultKind.RATE_LIMITED
    return FaultKind.STREAM_CUT


def _classified(exc: BaseException) -> Fault:
    status = _status(exc)
    message = _provider_text(str(getattr(exc, "message", "") or exc))
    retry_after = _retry_after(exc)

    def fault(kind: FaultKind) -> Fault:
        return Fault(kind, status, message, retry_after=retry_after)

    if isinstance(exc, litellm.exceptions.UnsupportedParamsError):
        # LiteLLM's own parameter check, made before anything is sent.
        return Fault(FaultKind.BAD_REQUEST, status, message, sent=False)
    if isinstance(exc, litellm.exceptions.MidStreamFallbackError):
        return fault(FaultKind.STREAM_CUT)
    if _is_refusal(exc, message):
        return fault(FaultKind.REFUSED)
    if isinstance(exc, litellm.exceptions.ContextWindowExceededError) or _too_long(exc, message):
        return fault(FaultKind.TOO_LONG)
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


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(out) < 12 and cause not in out:
        out.append(cause)
        cause = cause.__cause__ or cause.__context__
    return out


def _on_the_network(exc: BaseException) -> bool:
    """The HTTP client's own error is in the chain: the request was on the network."""
    return any(
        isinstance(e, httpx.HTTPError) or type(e).__module__.startswith("httpcore")
        for e in _chain(exc)
    )


# Errors an HTTP client raises about what it was asked to write, before writing it: h11
# refusing a header value with CR/LF (httpx.LocalProtocolError), a URL it cannot send to.
_REFUSED_LOCALLY = (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)


def _refused_locally(exc: BaseException) -> bool:
    return any(
        isinstance(e, _REFUSED_LOCALLY) or type(e).__name__ == "LocalProtocolError"
        for e in _chain(exc)
    )


# Errors that come before a request is written: the connection was never made.
_BEFORE_WRITE = ("ConnectError", "ConnectTimeout", "PoolTimeout", "ClientConnectorError",
                 "ConnectionRefusedError", "ClientConnectorDNSError", "gaierror")
# Statuses that say the provider (or a gateway in front of it) gave up while the request
# may still be generating, and billing, upstream.
_BILLED_STATUSES = frozenset({408, 502, 504, 520, 521, 522, 523, 524, 529})


def _with_billing(exc: BaseException, fault: Fault) -> Fault:
    """`fault`, marked `billed` unless there is evidence the provider billed nothing.

    Evidence is either the connection never made (a refused or timed-out connect, a name
    that did not resolve: nothing was written) or the provider's own error answer (a status
    it sent for a rate limit, a bad request, a refusal, a server error, with no transport
    error in the chain: providers do not bill what they refuse). A timeout, a connection
    dropped after the write, a stream cut, or a gateway that gave up upstream (408, 502,
    504, 52x) may all have been billed.
    """
    if isinstance(exc, raised.EmptyAnswerError):
        return replace(fault, billed=True)
    chain = _chain(exc)
    if any(type(e).__name__ in _BEFORE_WRITE for e in chain):
        return fault
    transport = any(_is_transport_error(e) for e in chain[1:])
    answered = fault.kind in (
        FaultKind.RATE_LIMITED, FaultKind.ACCESS, FaultKind.BAD_REQUEST, FaultKind.REFUSED,
        FaultKind.SERVER_ERROR,
    )
    if answered and not transport and fault.status not in _BILLED_STATUSES:
        return fault
    if fault.kind is FaultKind.CONNECTION and any(resets.reset(e) for e in chain):
        return replace(fault, stale=True)  # never read: nothing billed (`resets`)
    if fault.kind is FaultKind.CONNECTION and any(resets.closed(e) for e in chain):
        return replace(fault, stale=True, billed=True)  # closed unanswered: it may have been read
    return replace(fault, billed=True)



def _is_transport_error(error: BaseException) -> bool:
    """An HTTP client's own error (not a status it read): httpx's, httpcore's, aiohttp's,
    or an OS-level connection error."""
    if isinstance(error, httpx.HTTPStatusError):
        return False
    return (
        isinstance(error, httpx.TransportError)
        or type(error).__module__.startswith(("httpcore", "aiohttp"))
        or isinstance(error, ConnectionError | TimeoutError)
    )


# Local failures about the route rather than the request: its SDK, client or credentials.
_ROUTE_WORDS = ("credential", "auth", "token", "sdk", "client")


def _about_the_route(error: BaseException) -> bool:
    name = type(error).__name__.lower()
    return (
        isinstance(error, ImportError)
        or type(error) is openai.OpenAIError
        or any(word in name for word in _ROUTE_WORDS)
    )


def _not_sent(exc: BaseException, fault: Fault) -> Fault:
    """A failure with no evidence of sending: about the route when what failed was its
    SDK, its client or its credentials (the next route may serve), else the request. The
    text is the outermost such error's (LiteLLM's own wrapper says least)."""
    chain = _chain(exc)
    route = next((e for e in chain[1:] if _about_the_route(e)), None)
    cause = route or chain[-1]
    text = f"{type(cause).__name__}: {str(cause)[:300]}" if cause is not exc else fault.message
    if route is not None or fault.kind is FaultKind.ACCESS:
        return Fault(FaultKind.ACCESS, None, text, sent=False)
    return Fault(FaultKind.BAD_REQUEST, None, text, sent=False, local=text)


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
    if seconds is None or seconds != seconds or seconds < 0:
        return None  # NaN or negative: not a wait
    # A wait of days, or `inf`, would close a route's rate window for good: honoured up to
    # an hour, after which the route is asked again (and rests again if still refusing).
    return min(seconds, RETRY_AFTER_CAP)


# How providers say a prompt did not fit the model's window (LiteLLM maps some of these to
# ContextWindowExceededError by the same texts; a proxy in between may not): OpenAI's,
# Anthropic's, llama.cpp's, xAI's ("maximum prompt length is ..."), vLLM's ("longer than
# the maximum model length of ...", `max_model_len`).
_TOO_LONG = ("context_length_exceeded", "maximum context length", "prompt is too long",
             "exceeds the available context size", "context window", "too many tokens",
             "maximum prompt length", "maximum model length", "max_model_len",
             "input is too long", "too many input tokens")
# A server nobody listed: a word of excess beside a word of the prompt's length.
_EXCESS = re.compile(r"\b(exceed(s|ed|ing)?|too (long|large|many)|(longer|greater|more|larger) than)\b")
_LENGTH = re.compile(
    r"\b(context|prompt|input|sequence|model)( \w+)? (length|window|size|limit|tokens?)\b"
    r"|\b(context|token) limit\b"
)


def _too_long(exc: BaseException, message: str) -> bool:
    status = _status(exc)
    if status not in (400, 413, 422):
        return False
    text = f"{message} {getattr(exc, 'body', '') or ''}".lower()
    return any(marker in text for marker in _TOO_LONG) or bool(
        _EXCESS.search(text) and _LENGTH.search(text)
    )


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
