"""No secret in any output: one scrubber knows every secret the router was given, wherever
a provider echoes it (issue: promises by construction, part 4)."""

from __future__ import annotations

import sqlite3
import string
import traceback
import warnings
from pathlib import Path
from typing import Any

import litellm
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

from policy_router import AttemptLog, Route, Router
from policy_router.ground.secrets import scrub_exception, secrets_in
from policy_router.testing import Fail, FakeProvider

from .conftest import MESSAGES


def _everything(exc: BaseException, router: Router, route: Route, log: Path, lines: list[str]) -> str:
    """Every text a user can see of one failed request."""
    texts = [str(exc), repr(exc), *map(repr, exc.args), *getattr(exc, "__notes__", [])]
    texts += traceback.format_exception(exc)
    cause: BaseException | None = exc
    while cause is not None:
        texts += [str(cause), repr(cause), repr(vars(cause)) if hasattr(cause, "__dict__") else ""]
        response = getattr(cause, "response", None)
        request = getattr(response, "request", None)
        if request is not None:
            texts += [str(request.url), repr(dict(request.headers))]
        cause = cause.__cause__ or cause.__context__
    journey = getattr(exc, "journey", None)
    texts += [str(journey), repr(journey), repr(route), str(router.report(since=None)), *lines]
    with sqlite3.connect(log) as db:
        texts += [repr(row) for row in db.execute("select * from attempts")]
        texts += [repr(row) for row in db.execute("select * from skips")]
    return "\n".join(texts)


secrets = st.text(string.ascii_letters + string.digits, min_size=12, max_size=24)


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=secrets,
    header=secrets,
    password=secrets,
    env=secrets,
)
def test_a_provider_echoing_every_secret_puts_none_in_any_output(
    fake: FakeProvider,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    header: str,
    password: str,
    env: str,
) -> None:
    """Secrets in every credential slot, echoed back in the provider's error text (with the
    URL it was called on): the re-raised LiteLLM exception and its chain, the journey, the
    route's repr, the log lines, the attempt log and the report contain none of them, and
    the exception keeps its LiteLLM class."""
    fake.reset()
    monkeypatch.setenv("PR_TEST_ORG", env)
    base = fake.base_url.replace("http://", f"http://user:{password}@")
    echoed = f"Incorrect API key provided: {key}; header {header}; url {base}; org {env}"
    fake.script("echo", Fail(401, echoed))
    log = tmp_path_factory.mktemp("log") / "attempts.sqlite"
    config = {
        "groups": {
            "g": {
                "routes": [
                    {
                        "model": "openai/echo",
                        "api_base": base,
                        "api_key": key,
                        "extra_headers": {"X-Api-Key": header},
                        "user": "os.environ/PR_TEST_ORG",
                        "capabilities": {"tools": True},
                    }
                ]
            }
        }
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the literal key in this config is the point
        router = Router.from_config(config)
    router = Router(router.routes, observers=[AttemptLog(log)])
    lines: list[str] = []
    sink = logger.add(lines.append, level="DEBUG", filter="policy_router")
    logger.enable("policy_router")
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            router.completion(model="g", messages=MESSAGES)
    finally:
        logger.remove(sink)
        logger.disable("policy_router")
    seen = _everything(caught.value, router, router.routes[0], log, lines)
    for secret in (key, header, password, env):
        assert secret not in seen, secret
    assert fake.requests() == 1 and "***" in str(caught.value)
    assert isinstance(caught.value, litellm.APIError | openai.APIStatusError)


def test_secrets_are_found_in_urls_and_under_any_secret_name() -> None:
    """Userinfo, secret-looking query parameters, headers and extra values are secrets."""
    found = secrets_in(
        {
            "api_base": "https://u:pw-123456@host/v1?api-key=qk-999999&region=eu",
            "extra_headers": {"Authorization": "Bearer tok-777777", "X-Trace": "visible"},
        },
        ["env-read-value"],
    )
    assert set(found) == {"pw-123456", "qk-999999", "Bearer tok-777777", "tok-777777", "env-read-value"}


def test_the_scrubber_keeps_the_class_status_and_traceback() -> None:
    """A scrubbed LiteLLM exception is the same object of the same class and status."""
    try:
        raise litellm.AuthenticationError("bad key sk-abcdef123", llm_provider="openai", model="m")
    except litellm.AuthenticationError as caught:
        exc = caught
        exc.add_note("note sk-abcdef123")
        same = scrub_exception(exc, ("sk-abcdef123",))
    assert same is exc and isinstance(same, litellm.AuthenticationError)
    assert same.status_code == 401 and same.__traceback__ is not None
    assert "sk-abcdef123" not in str(same) + "".join(same.__notes__) + repr(same.args)


def test_repr_of_a_route_hides_url_credentials() -> None:
    """`repr(Route)` shows the host, never the userinfo password or a key in the query."""
    route = Route("openai/x", api_base="http://u:hunter2-pass@127.0.0.1:9/v1?key=qkey-12345")
    assert "hunter2-pass" not in repr(route) and "qkey-12345" not in repr(route)
    assert "127.0.0.1" in repr(route)


def test_an_unexpected_error_is_scrubbed_too(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception that is no provider outcome is re-raised as itself, scrubbed."""
    from policy_router.drive.seam import transport

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("client broke with key sk-boom-123456")

    monkeypatch.setattr(transport, "call", boom)
    router = Router([Route("openai/a", api_base=fake.base_url, api_key="sk-boom-123456", capabilities={"tools": True})])
    with pytest.raises(RuntimeError) as caught:
        router.completion(model="openai/a", messages=MESSAGES)
    assert "sk-boom-123456" not in str(caught.value)


def test_an_exception_an_exception_holds_is_scrubbed_too() -> None:
    """LiteLLM's MidStreamFallbackError prints its `original_exception` in its own text; no
    chain links to it, so a scrubber that walked only `__cause__` left the key there."""
    inner = litellm.InternalServerError("boom sk-held-inside-1", llm_provider="openai", model="m")
    outer = litellm.exceptions.MidStreamFallbackError(
        message="cut", model="m", llm_provider="openai", original_exception=inner
    )
    assert "sk-held-inside-1" in str(outer)
    scrub_exception(outer, ("sk-held-inside-1",))
    assert "sk-held-inside-1" not in str(outer) + str(inner) + repr(outer.args)
