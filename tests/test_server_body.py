"""A request's body read as JSON: the document the client sent, in any encoding JSON may
come in, refused (a `ConfigError`, so a 400) when it nests past `MAX_DEPTH` or is not JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy_router import ConfigError
from policy_router.server.body import MAX_DEPTH, json_of

# Every encoding RFC 8259 allowed and json.loads reads from bytes.
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")

LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12
)


def nested(depth: int, leaf: Any, kinds: list[bool], brackets_in_text: int) -> Any:
    """`leaf` inside `depth` containers (a list where `kinds` says, else an object), with a
    string of brackets beside it that adds none (a count of brackets over-counts)."""
    value = leaf
    for i in range(depth):
        if kinds[i % len(kinds)]:
            value = [value, "[{" * brackets_in_text]
        else:
            value = {"k": value, "t": "{[" * brackets_in_text}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=150, deadline=None)
@given(
    depth=st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3),
    leaf=VALUES,
    kinds=st.lists(st.booleans(), min_size=1, max_size=4),
    brackets_in_text=st.integers(0, 60),
    encoding=st.sampled_from(ENCODINGS),
)
def test_a_body_nested_past_the_limit_is_refused_and_any_other_read_as_sent(
    depth: int, leaf: Any, kinds: list[bool], brackets_in_text: int, encoding: str
) -> None:
    """Around the limit, in every encoding, with brackets inside strings: a body is
    refused exactly when it nests deeper than MAX_DEPTH, and otherwise read as json.loads
    reads it."""
    value = nested(depth, leaf, kinds, brackets_in_text)
    raw = json.dumps(value, ensure_ascii=False).encode(encoding)
    if depth_of(value) > MAX_DEPTH:
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH}"):
            json_of(raw)
    else:
        assert json_of(raw) == json.loads(raw)


@settings(max_examples=100, deadline=None)
@given(value=VALUES, encoding=st.sampled_from(ENCODINGS))
def test_any_shallow_document_reads_as_json_loads_reads_it(value: Any, encoding: str) -> None:
    raw = json.dumps(value, ensure_ascii=False).encode(encoding)
    assert json_of(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe not json", b'{"a": NaN}', b"[Infinity]", b'{"a": 1} x', b"\xc3("])
def test_what_is_not_json_is_said_so(raw: bytes) -> None:
    with pytest.raises(ConfigError, match="not JSON"):
        json_of(raw)
