"""Policy files, LiteLLM's model_list, and the check/explain/prices commands."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from policy_router import Breaker, Budget, ConfigError, Order, Router
from policy_router.cli.main import main
from policy_router.testing import Fail, FakeProvider

from .conftest import MESSAGES


def policy(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {
        "groups": {
            "smart": {
                "order": "cheapest",
                "routes": [
                    {
                        "model": "openai/a",
                        "api_base": fake.base_url,
                        "api_key": "os.environ/FAKE_KEY",
                        "prices": "mine",
                        "capabilities": {"tools": True},
                    },
                    {
                        "model": "openai/b",
                        "api_base": fake.base_url,
                        "api_key": "os.environ/FAKE_KEY",
                        "prices": "mine",
                        "capabilities": {"tools": True},
                        "retry": {"attempts": 2, "jitter": False, "backoff": 0.01},
                    },
                ],
            }
        },
        "price_tables": {
            "mine": {
                "currency": "USD",
                "as_of": "2026-11-01",
                "source": "test",
                "models": {
                    "openai/a": {"input": "2", "output": "2"},
                    "openai/b": {"input": "1", "output": "1"},
                },
            },
        },
        "budget": {"cap": "1.00", "currency": "USD"},
        "breaker": {"failures": 2, "cooldown": 10},
        "deadline": 20,
        **extra,
    }


def test_a_policy_dict_builds_a_working_router(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups, order, tables, budget, breaker, retry and deadline all take effect."""
    monkeypatch.setenv("FAKE_KEY", "sk-from-env")
    fake.script("b", Fail(503))
    router = Router.from_config(policy(fake))
    routed = router.route(model="smart", messages=MESSAGES, max_tokens=10)
    assert [a.route for a in routed.journey.attempts] == ["openai/b", "openai/b"]  # retried
    assert router.spending().calls == 1
    assert fake.bodies("b")[0]["model"] == "b"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda p: p["groups"]["smart"]["routes"][1].update(reach="cloud"),
            "groups.smart.routes[1].reach: Input should be 'on_device' or 'vendor'",
        ),
        (
            lambda p: p["groups"]["smart"]["routes"][0].update(reacj="vendor"),
            "groups.smart.routes[0]: 'reacj' is neither a route field",
        ),
        (lambda p: p.update(brekaer={}), "brekaer: unknown key; did you mean 'breaker'?"),
        (lambda p: p.update(budgt={"cap": "1"}), "budgt: unknown key; did you mean 'budget'?"),
        (
            lambda p: p.update(breaker={"cooldwn": 5}),
            "breaker.cooldwn: unknown key; did you mean 'cooldown'?",
        ),
        (
            lambda p: p["groups"]["smart"]["routes"][0].update(timeot=3),
            "'timeot' is neither a route field",
        ),
        (lambda p: p.update(zzzz=1), "zzzz: unknown key; remove it or check its spelling"),
        (
            lambda p: p["groups"]["smart"].update(order="random"),
            "groups.smart.order: 'random' is not an ordering; use one of: as_listed",
        ),
        (lambda p: p.update(deadline=0), "deadline: Input should be greater than 0"),
        (
            lambda p: p["budget"].update(cap="-1"),
            "budget.cap: amount must be zero or more, got '-1'",
        ),
        (lambda p: p["budget"].update(cap=5.0), "budget.cap: 5.0 is a float"),
        (lambda p: p["breaker"].update(failures=0), "breaker: Breaker failures must be"),
        (
            lambda p: p["price_tables"]["mine"]["models"]["openai/a"].update(input=0.5),
            "models.'openai/a'.input must be a decimal string",
        ),
    ],
)
def test_config_errors_name_the_path_and_the_fix(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, change: Any, message: str
) -> None:
    """Each mistake is a ConfigError naming its place in the file."""
    monkeypatch.setenv("FAKE_KEY", "sk-from-env")
    data = policy(fake)
    change(data)
    with pytest.raises(ConfigError) as caught:
        Router.from_config(data)
    assert message in str(caught.value)


def test_literal_key_in_a_file_warns(fake: FakeProvider) -> None:
    """A literal secret is accepted, with a warning that says how to reference it instead."""
    data = policy(fake)
    data["groups"]["smart"]["routes"][0]["api_key"] = "sk-literal-1234"
    data["groups"]["smart"]["routes"][1]["api_key"] = "sk-literal-1234"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Router.from_config(data)
    assert any("os.environ/NAME" in str(w.message) for w in caught)


def test_litellm_model_list_from_its_docs_loads_and_routes(fake: FakeProvider) -> None:
    """A model_list in LiteLLM Router's own shape switches over in one line."""
    model_list = [
        {
            "model_name": "gpt-3.5-turbo",
            "litellm_params": {
                "model": "openai/a",
                "api_key": "sk-doc-1",
                "api_base": fake.base_url,
                "rpm": 6,
            },
            "model_info": {"supports_function_calling": True},
        },
        {
            "model_name": "gpt-3.5-turbo",
            "litellm_params": {
                "model": "openai/gpt-4o-mini",
                "api_key": "sk-doc-2",
                "api_base": fake.base_url,
                "tpm": 1000,
            },
        },
    ]
    fake.script("a", Fail(429))
    router = Router.from_litellm_model_list(model_list, breaker=Breaker())
    routed = router.route(model="gpt-3.5-turbo", messages=MESSAGES)
    assert routed.route.name == "openai/gpt-4o-mini"
    assert fake.requests("a") == 1 and fake.requests("gpt-4o-mini") == 1


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    import yaml

    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_check_lists_a_typo_a_missing_key_and_an_unpriced_route(
    fake: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`check` prints all three problems and exits 1; the repaired file exits 0."""
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    data = policy(fake)
    routes = data["groups"]["smart"]["routes"]
    routes.append({"model": "openai/gpt-4o-mni", "api_key": "os.environ/FAKE_KEY"})  # typo
    routes[0]["api_key"] = "os.environ/NOT_SET_KEY"
    routes.append(
        {
            "model": "openai/c",
            "api_base": fake.base_url,
            "api_key": "os.environ/FAKE_KEY",
            "capabilities": {"tools": True},
        }
    )  # no price under a refusing budget
    assert main(["check", str(write(tmp_path, data))]) == 1
    out = capsys.readouterr().out
    assert "environment variable NOT_SET_KEY is not set" in out
    assert "openai/gpt-4o-mni: unusable" in out
    assert "openai/c: unpriced" in out
    assert main(["check", str(write(tmp_path, policy(fake))), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["problems"]) == (True, [])
    assert [(r["route"], r["reach"]) for r in report["routes"]] == [
        ("openai/a", "on_device"),
        ("openai/b", "on_device"),
    ]


def test_check_reports_stale_tables(
    fake: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A price table older than --max-age days is reported, never silently trusted."""
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    assert main(["check", str(write(tmp_path, policy(fake))), "--max-age", "0"]) == 1
    assert "days old (as of 2026-11-01)" in capsys.readouterr().out


def test_explain_and_prices_commands(
    fake: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """explain shows every verdict with estimates; prices lists the rows with dates."""
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    path = str(write(tmp_path, policy(fake)))
    assert main(["explain", path, "--model", "smart", "--images", "--json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)["verdicts"]
    assert {v["check"] for v in verdicts} == {"requirements"}
    assert main(["explain", path, "--model", "smart", "--max-tokens", "50"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "openai/b"  # cheaper first
    assert main(["prices", path]) == 0
    assert "openai/a" in capsys.readouterr().out
    assert main(["prices"]) == 0
    assert "anthropic/claude-sonnet-4-5" in capsys.readouterr().out
    assert fake.requests() == 0


def test_order_per_group_and_budget_object(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Router takes one order per group, as the config does."""
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    with pytest.raises(ConfigError, match="order names groups no route is in"):
        Router.from_config(policy(fake), order={"nope": Order.CHEAPEST})
    assert isinstance(Budget("1"), Budget)


def test_config_can_log_attempts(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """observers: {attempt_log: PATH} writes the attempt log next to the config file."""
    from policy_router import read_attempts

    monkeypatch.setenv("FAKE_KEY", "sk-x")
    path = write(tmp_path, policy(fake, observers={"attempt_log": "attempts.sqlite"}))
    Router.from_config(path).completion(model="smart", messages=MESSAGES, max_tokens=5)
    assert [r["route"] for r in read_attempts(tmp_path / "attempts.sqlite")] == ["openai/b"]


def test_yaml_anchors_and_merge_keys_load_as_safe_load_reads_them(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy file that shares a route's settings through `&anchor` and `<<: *anchor`
    loads as `yaml.safe_load` reads it: the merged keys arrive, a key of the route's own
    overrides a merged one, and a key written twice in one mapping is still refused."""
    import yaml

    monkeypatch.setenv("FAKE_KEY", "sk-from-env")
    text = f"""
groups:
  smart:
    routes:
      - &common
        model: openai/a
        api_base: {fake.base_url}
        api_key: os.environ/FAKE_KEY
        reach: vendor
        capabilities: {{tools: true}}
      - <<: *common
        model: openai/b
        rpm: 7
"""
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert yaml.safe_load(text)["groups"]["smart"]["routes"][1]["model"] == "openai/b"
    router = Router.from_config(path)
    b = router.routes[1]
    assert (b.model, b.rpm, b.kwargs["api_base"]) == ("openai/b", 7, fake.base_url)
    assert b.capabilities is not None and b.capabilities.get("tools") is True
    fake.script("a", Fail(503))
    routed = router.route(model="smart", messages=MESSAGES, max_tokens=5)
    assert routed.route.model == "openai/b"
    path.write_text(text + "        rpm: 8\n")
    with pytest.raises(ConfigError, match="duplicate key 'rpm'"):
        Router.from_config(path)


def test_a_sqlite_store_in_a_file_may_settle_a_call_with_the_next_transaction(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`store: {sqlite: ..., settle_within: s}`: the router that made an async call reads
    it settled at once; another process on the file reads it held (its worst case) until
    `s` has passed, then settled. A wrong value is refused naming the field."""
    import asyncio

    monkeypatch.setenv("FAKE_KEY", "sk-x")
    store = {"sqlite": "state.sqlite", "settle_within": 0.3}
    path = write(tmp_path, policy(fake, budget={"cap": "5.00"}, store=store))
    here, there = Router.from_config(path), Router.from_config(path)

    async def run() -> None:
        await here.acompletion(model="smart", messages=MESSAGES, max_tokens=5)
        held = there.spending()
        assert held.spent.micros == 0 and held.reserved.micros > 0 and held.in_flight == 1
        await asyncio.sleep(0.5)

    asyncio.run(run())
    settled = there.spending()
    assert settled.spent.micros > 0 and settled.reserved.micros == 0 and settled.in_flight == 0
    assert settled == here.spending()
    here.close()
    there.close()
    bad = write(tmp_path, policy(fake, store={"sqlite": "state.sqlite", "settle_within": -1}))
    with pytest.raises(ConfigError, match="settle_within"):
        Router.from_config(bad)
