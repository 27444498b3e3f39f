"""Route and Reach: locality inferred only from the host a route really connects to."""

from __future__ import annotations

import pytest

from policy_router import ConfigError, Reach, Route, Router
from policy_router.testing import FakeProvider

from .conftest import MESSAGES, fake_route


@pytest.mark.parametrize(
    ("model", "kwargs", "reach"),
    [
        ("openai/x", {"api_base": "http://127.0.0.1:8080/v1"}, Reach.ON_DEVICE),
        ("openai/x", {"api_base": "http://127.9.9.9/v1"}, Reach.ON_DEVICE),
        ("openai/x", {"api_base": "http://localhost:8000"}, Reach.ON_DEVICE),
        ("openai/x", {"api_base": "http://[::1]:8000/v1"}, Reach.ON_DEVICE),
        ("openai/x", {"api_base": "localhost:8000"}, Reach.ON_DEVICE),
        ("openai/x", {"api_base": "https://api.openai.com/v1"}, Reach.VENDOR),
        ("openai/x", {"api_base": "http://10.0.0.5:8000/v1"}, Reach.VENDOR),
        ("openai/x", {"api_base": "http://localhost.evil.com/v1"}, Reach.VENDOR),
        ("openai/gpt-4o-mini", {}, Reach.VENDOR),
        ("ollama/llama3.1", {}, Reach.ON_DEVICE),
        ("ollama/gpt-oss:120b-cloud", {"api_base": "https://ollama.com"}, Reach.VENDOR),
        ("llamafile/m", {}, Reach.ON_DEVICE),
        ("hosted_vllm/m", {}, Reach.VENDOR),
    ],
)
def test_reach_is_inferred_from_the_host(model: str, kwargs: dict[str, str], reach: Reach) -> None:
    """Undeclared, a route is on-device only when its (default) api_base host is loopback."""
    route = Route(model, **kwargs)
    assert (route.reach, route.reach_declared) == (reach, False)


def test_declared_reach_wins() -> None:
    """A declared reach wins over what the host suggests, in both directions."""
    assert Route("openai/x", api_base="http://127.0.0.1:1", reach="vendor").reach is Reach.VENDOR
    lan = Route("openai/x", api_base="http://10.0.0.5:8000", reach=Reach.ON_DEVICE)
    assert (lan.reach, lan.reach_declared) == (Reach.ON_DEVICE, True)


def test_repr_hides_secrets_and_route_is_immutable() -> None:
    """The repr never shows a key, header secret or token, and a route cannot be changed."""
    route = Route(
        "openai/x",
        api_key="sk-very-secret",
        extra_headers={"Authorization": "Bearer tok-secret", "X-Trace": "visible"},
        aws_secret_access_key="aws-secret",
    )
    text = repr(route)
    assert "secret" not in text.replace("aws_secret_access_key", "")
    assert "visible" in text
    assert route.redact("boom sk-very-secret tok-secret") == "boom *** ***"
    with pytest.raises(AttributeError):
        route.model = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("",), {}, "LiteLLM model string"),
        (("openai/x",), {"reach": "cloud"}, "reach must be 'on_device' or 'vendor'"),
        (("openai/x",), {"capabilities": {"telepathy": True}}, "telepathy is not a capability"),
        (("openai/x",), {"capabilities": {"tools": "yes"}}, "tools must be true or false"),
        (("openai/x",), {"num_retries": 3}, "retries are off"),
        (("openai/x",), {"fallbacks": ["y"]}, "router decides fallbacks"),
        (("openai/x",), {"group": ""}, "group must be a non-empty string"),
        # A table's dict (what PriceTable.from_dict takes) failed at Router() with an
        # AttributeError deep in pricing.
        (("openai/x",), {"prices": {"currency": "USD"}}, r"prices must be a PriceTable"),
    ],
)
def test_bad_route_is_refused_with_the_field_named(
    args: tuple[str, ...], kwargs: dict[str, object], match: str
) -> None:
    """A malformed route raises ConfigError naming the field and the fix."""
    with pytest.raises(ConfigError, match=match):
        Route(*args, **kwargs)  # type: ignore[arg-type]


def test_group_defaults_to_the_model_string() -> None:
    """An ungrouped route is reached by its model string, like a LiteLLM model_name."""
    assert Route("openai/gpt-4o-mini").group == "openai/gpt-4o-mini"


def test_a_route_copies_deep_copies_and_pickles_as_itself() -> None:
    """A route survives `copy`, `copy.deepcopy` and a pickle whole: its kwargs (the key
    included, so the copy still works), its declared and inferred parts, its secrets for
    redaction, and it stays immutable. Each of them raised "Route is immutable" before, so
    `copy.deepcopy` (and `dataclasses.asdict`) of any record holding a route did too."""
    import copy
    import pickle

    route = Route(
        "openai/x", group="g", api_key="sk-very-secret", api_base="http://127.0.0.1:1/v1",
        extra_headers={"X-Trace": "t"}, capabilities={"tools": True}, rpm=3, reach="vendor",
    )
    for made in (copy.copy(route), copy.deepcopy(route), pickle.loads(pickle.dumps(route))):
        assert repr(made) == repr(route) and "sk-very-secret" not in repr(made)
        assert dict(made.kwargs) == dict(route.kwargs) and made.secrets == route.secrets
        assert (made.id, made.name, made.group, made.rpm) == (route.id, route.name, "g", 3)
        assert (made.reach, made.reach_declared, made.reach_reason) == (Reach.VENDOR, True, "declared")
        assert dict(made.capabilities) == dict(route.capabilities)
        assert made.redact("boom sk-very-secret") == "boom ***"
        with pytest.raises(AttributeError):
            made.rpm = 4  # type: ignore[misc]
        with pytest.raises(TypeError):
            made.kwargs["api_key"] = "other"  # type: ignore[index]


def test_a_routed_answer_turns_into_a_dict_without_its_key(fake: FakeProvider) -> None:
    """`dataclasses.asdict` of a routed answer (as a caller logging it would) works, and
    what it shows carries no key: the route in it is the route, its repr masked."""
    import dataclasses

    route = fake_route(fake, "a")
    router = Router([route])
    routed = router.route(model="g", messages=MESSAGES)
    shown = dataclasses.asdict(routed)
    assert shown["route"].name == "openai/a"
    assert route.kwargs["api_key"] not in str(shown)


def test_the_policy_files_route_keys_are_the_routes_own_arguments() -> None:
    """One list of a route's own fields: the policy file's route keys are `Route`'s own
    keyword arguments (bar `group`, which the file's layout gives, and `secrets`, which the
    file reads from `os.environ/`), and a route keeps each of them under its name (bar
    `capabilities`, kept parsed). A field added to one and not the other fails here."""
    import inspect

    from policy_router.config.spec import RouteSpec

    arguments = {
        name for name, p in inspect.signature(Route).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    assert set(RouteSpec.model_fields) == arguments - {"group", "secrets"}
    assert arguments - {"secrets", "capabilities"} <= set(Route.__slots__)
