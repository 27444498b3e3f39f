"""The server's reading of a request, generated over names and values nobody listed: an
argument OpenAI's API does not define is refused naming it, and a request can never loosen
what its key holds it to (pure code: `policy_router.server.reading`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy_router import ConfigError
from policy_router.config.keys import ApiKey
from policy_router.server.reading import ENDPOINT_FIELDS, read

ENDPOINTS = sorted(ENDPOINT_FIELDS)
HELD = ApiKey(name="held", sha256="0" * 64, on_device=True)
OPEN = ApiKey(name="open", sha256="1" * 64)
VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5))
# The least each path's body must hold by OpenAI's definition, beside the argument tried.
LEAST: dict[str, dict[str, Any]] = {
    "chat": {"messages": [{"role": "user", "content": "hi"}]},
    "completion": {"prompt": "Once"},
    "embedding": {"input": "hi"},
    "responses": {},
}
UNLISTED = st.text(min_size=1, max_size=12).filter(
    lambda k: k != "policy_router" and all(k not in fields for fields in ENDPOINT_FIELDS.values())
)


@given(st.sampled_from(ENDPOINTS), UNLISTED, VALUES)
def test_an_argument_nobody_listed_is_refused_naming_it(endpoint: str, name: str, value: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        read(endpoint, {"model": "g", name: value}, {}, OPEN, None)
    assert repr(name) in str(refused.value)


@given(
    st.sampled_from(ENDPOINTS),
    st.one_of(st.none(), st.booleans()),
    st.one_of(st.none(), st.sampled_from(["false", "0", "no", "true", "FALSE"])),
    st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)),
    st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)),
)
def test_a_request_never_loosens_its_key_or_the_servers_deadline(
    endpoint: str, asked: bool | None, header: str | None, deadline: float | None, most: float | None
) -> None:
    """Whatever the body's `policy_router` field and the headers say: a key held on the
    device stays there, and a deadline is never longer than the server's."""
    body: dict[str, Any] = {"model": "g", **LEAST[endpoint]}
    policy: dict[str, Any] = {}
    if asked is not None:
        policy["on_device"] = asked
    if deadline is not None:
        policy["deadline"] = deadline
    if policy:
        body["policy_router"] = policy
    headers = {} if header is None else {"x-policy-router-on-device": header}
    kwargs = read(endpoint, body, headers, HELD, most)
    assert kwargs["on_device"] is True
    if most is not None:
        assert kwargs["deadline"] <= most
    loose = read(endpoint, body, headers, OPEN, most)
    assert loose["on_device"] is (asked if asked is not None else header in ("true",))
