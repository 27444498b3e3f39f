"""A route's identity: a stable `id` (explicit, or the model and its base, never a key)
under which health, rate windows, ordering statistics, the attempt log and the report
are kept; `name` only labels it."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policy_router import AttemptLog, Breaker, ConfigError, Order, Route, Router
from policy_router.ground.route import default_id
from policy_router.testing import Fail, FakeProvider

from .conftest import CAPS, MESSAGES, fake_route

BREAKER = Breaker(failures=1, cooldown=60)


def _route(fake: FakeProvider, model: str, **kw: object) -> Route:
    """A FakeProvider route whose name, id and group the test gives."""
    kw.setdefault("group", "g")
    return Route(f"openai/{model}", api_base=fake.base_url, api_key=f"sk-test-{model}", capabilities=CAPS, **kw)  # type: ignore[arg-type]


def _base_id(fake: FakeProvider, model: str) -> str:
    return default_id(f"openai/{model}", fake.base_url)


def _one(router: Router, group: str = "g") -> str:
    return router.route(model=group, messages=MESSAGES).route.name


def test_the_default_id_is_the_model_and_its_base_never_the_key(fake: FakeProvider) -> None:
    one = fake_route(fake, "a")
    rotated = Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-another-key")
    assert one.id == rotated.id == _base_id(fake, "a")
    assert one.id.startswith("openai/a@127.0.0.1:") and one.id.endswith("/v1")
    assert "sk-" not in one.id and Route("openai/a").id == "openai/a"
    assert Route("openai/a", id="openai-prod").id == "openai-prod"
    assert Route("openai/a", id="openai-prod").name == "openai-prod"  # labelled by its id
    with pytest.raises(ConfigError, match=r"id must be a non-empty string"):
        Route("openai/a", id=" ")


_TEXT = st.text(string.ascii_letters + string.digits + "-_", min_size=6, max_size=20)


@settings(max_examples=200, deadline=None)
@given(user=_TEXT, password=_TEXT, query_key=_TEXT, fragment=_TEXT, key=_TEXT)
def test_no_credential_anywhere_in_a_base_url_reaches_the_id(
    user: str, password: str, query_key: str, fragment: str, key: str
) -> None:
    """Userinfo, a query string, a fragment and the route's own key are never in its id
    (the id is shown in check notes, reports and the attempt log)."""
    base = f"https://{user}:{password}@gw.example.com:8443/v1/?api-key={query_key}#{fragment}"
    route = Route("openai/m", api_base=base, api_key=key)
    for secret in (password, query_key, fragment, key):
        assert secret not in route.id
    assert route.id.startswith("openai/m@gw.example.com:8443/v1")
    if user not in "openai/m@gw.example.com:8443/v1":
        assert user not in route.id
    # A key that is also a path segment is masked (the route's own secrets are redacted).
    assert key not in Route("openai/m", api_base=f"https://h/{key}/v1", api_key=key).id


def test_default_id_reads_a_base_without_a_scheme() -> None:
    assert default_id("m", "127.0.0.1:8000/v1/") == "m@127.0.0.1:8000/v1"
    assert default_id("m", None) == default_id("m", "  ") == "m"


def test_a_renamed_route_keeps_its_health_and_its_report_row(
    fake: FakeProvider, tmp_path: Path
) -> None:
    log = tmp_path / "attempts.sqlite"
    fake.script("a", Fail(503))
    router = Router(
        [_route(fake, "a", name="first"), fake_route(fake, "b")],
        breaker=Breaker(failures=3, cooldown=60),
        observers=[AttemptLog(log)],
    )
    assert _one(router) == "openai/b"
    assert router.health()["first"].failures == 1
    changes = router.reconfigure(
        routes=[_route(fake, "a", name="renamed"), fake_route(fake, "b")]
    )
    assert changes.routes_changed == ("renamed",) and not changes.routes_removed
    assert router.health()["renamed"].failures == 1  # the same deployment, the same record
    fake.script("a", Fail(503))
    _one(router)
    assert router.health()["renamed"].failures == 2
    rows = {r.id: r for r in router.report().routes}
    a = _base_id(fake, "a")
    assert rows[a].route == "renamed" and rows[a].requests == 2  # one row, the latest name
    assert [r.route for r in router.report().routes].count("first") == 0


def test_a_rotated_key_keeps_the_routes_history(fake: FakeProvider) -> None:
    fake.script("a", Fail(503))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=BREAKER)
    _one(router)
    assert router.resting().keys() == {"openai/a"}
    rotated = Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-rotated", capabilities=CAPS)
    router.reconfigure(routes=[rotated, fake_route(fake, "b")])
    assert router.resting().keys() == {"openai/a"}  # a new key is not a new deployment
    assert _one(router) == "openai/b" and fake.requests("a") == 1


def test_one_id_in_two_groups_is_one_deployment_with_one_breaker(fake: FakeProvider) -> None:
    fake.script("shared", Fail(503))
    router = Router(
        [
            fake_route(fake, "shared", group="chat", id="shared-prod"),
            fake_route(fake, "b", group="chat"),
            _route(fake, "shared", group="tools", id="shared-prod", name="shared-for-tools"),
            fake_route(fake, "c", group="tools"),
        ],
        breaker=BREAKER,
    )
    assert _one(router, "chat") == "openai/b"  # shared failed once: it rests
    routed = router.route(model="tools", messages=MESSAGES)
    assert routed.route.name == "openai/c" and fake.requests("shared") == 1
    skip = routed.journey.skips[0]
    assert skip.route == "shared-for-tools" and skip.route_id == "shared-prod"
    assert "rest" in skip.reason
    assert router.health()["shared-prod"] == router.health()["shared-for-tools"]
    router.reset("shared-prod")  # by id: both names are healthy again
    assert not router.resting()


def test_two_explicit_ids_alike_in_one_group_are_refused_naming_both(fake: FakeProvider) -> None:
    with pytest.raises(ConfigError) as refused:
        Router(
            [
                fake_route(fake, "a", id="prod"),
                fake_route(fake, "b"),
                fake_route(fake, "c", id="prod"),
            ]
        )
    text = str(refused.value)
    assert "routes[0] ('prod')" in text and "routes[2]" in text and "id='prod'" in text
    # The same explicit id in two groups is one deployment: accepted.
    Router([fake_route(fake, "a", id="prod"), fake_route(fake, "a", id="prod", group="h")])


def test_two_accounts_of_one_model_keep_working_and_check_says_how_history_follows(
    fake: FakeProvider,
) -> None:
    """A LiteLLM model_list balancing two keys: one model, one base, two accounts."""
    one = Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-acct-one", capabilities=CAPS)
    two = Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-acct-two", capabilities=CAPS)
    fake.script("a", Fail(503))
    router = Router([one, two], breaker=BREAKER)
    base_id = _base_id(fake, "a")
    ids = [r.id for r in router._life.now.routes]
    assert ids == [base_id, f"{base_id}#2"]
    assert _one(router) == "openai/a#2"  # the first account failed and rests; the second answers
    assert router.resting().keys() == {"openai/a"}
    notes = [n for n in router.check() if "follow its position" in n]
    assert len(notes) == 1 and "explicit id=" in notes[0] and "openai/a#2" in notes[0]
    assert not any("sk-acct" in n for n in router.check())
    explicit = Router(
        [
            Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-acct-one", id="one", capabilities=CAPS),
            Route("openai/a", group="g", api_base=fake.base_url, api_key="sk-acct-two", id="two", capabilities=CAPS),
        ]
    )
    assert not [n for n in explicit.check() if "position" in n or "share" in n]


def test_check_says_when_two_groups_share_a_default_id_with_different_keys(
    fake: FakeProvider,
) -> None:
    router = Router(
        [
            Route("openai/a", group="chat", api_base=fake.base_url, api_key="sk-one", capabilities=CAPS),
            Route("openai/a", group="batch", api_base=fake.base_url, api_key="sk-two", capabilities=CAPS),
        ]
    )
    notes = [n for n in router.check() if "share one breaker" in n]
    assert len(notes) == 1 and "['batch', 'chat']" in notes[0] and "sk-" not in notes[0]
    same_key = Router(
        [
            Route("openai/a", group="chat", api_base=fake.base_url, api_key="sk-one", capabilities=CAPS),
            Route("openai/a", group="batch", api_base=fake.base_url, api_key="sk-one", capabilities=CAPS),
        ]
    )
    assert not [n for n in same_key.check() if "share one breaker" in n]


def test_fastest_statistics_and_sticky_follow_the_id_across_a_rename(fake: FakeProvider) -> None:
    router = Router(
        [fake_route(fake, "a", id="alpha"), fake_route(fake, "b", id="beta")],
        order=Order.sticky(["beta"], then=Order.AS_LISTED),
    )
    assert _one(router) == "beta"
    router.reconfigure(
        routes=[fake_route(fake, "a", id="alpha"), _route(fake, "b", id="beta", name="B")]
    )
    assert _one(router) == "B"  # sticky names the id, not the label


def test_ids_from_a_policy_file_and_a_litellm_model_list(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDENTITY_KEY", "sk-x")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "groups": {
                    "g": {
                        "routes": [
                            {"model": "openai/a", "id": "a-prod", "name": "A",
                             "api_base": fake.base_url, "api_key": "os.environ/IDENTITY_KEY",
                             "capabilities": CAPS},
                        ]
                    }
                }
            }
        )
    )
    route = Router.from_config(policy)._life.now.routes[0]
    assert (route.id, route.name) == ("a-prod", "A")
    listed = Router.from_litellm_model_list(
        [
            {
                "model_name": "g",
                "litellm_params": {"model": "openai/a", "api_base": fake.base_url, "api_key": "sk-x"},
                "model_info": {"id": "deployment-1"},
            }
        ]
    )
    assert listed._life.now.routes[0].id == "deployment-1"
