"""LiteLLM's own configuration loads faithfully: a model_list and a whole proxy config.yaml,
every setting honoured or reported with its place; money read exactly; a CLI that never
shows a traceback for a user's mistake."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policy_router import Budget, ConfigError, Money, Router
from policy_router.cli.main import main
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import KEY_PREFIX, MESSAGES


def deployment(fake: FakeProvider, model: str, **params: Any) -> dict[str, Any]:
    return {
        "model_name": "gpt",
        "litellm_params": {
            "model": f"openai/{model}",
            "api_base": fake.base_url,
            "api_key": f"{KEY_PREFIX}{model}",
            **params,
        },
        "model_info": {"supports_function_calling": True},
    }


def test_an_unset_environment_variable_is_an_error_naming_it(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.environ/NAME that is not set raises naming NAME; never another key from the env."""
    monkeypatch.delenv("NOPE_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    entry = deployment(fake, "a", api_key="os.environ/NOPE_KEY")
    with pytest.raises(ConfigError, match=r"model_list\[0\].litellm_params.api_key: environment variable NOPE_KEY is not set"):
        Router.from_litellm_model_list([entry])
    assert fake.requests() == 0


def test_model_info_costs_price_the_route(fake: FakeProvider) -> None:
    """Per-token costs in model_info (or litellm_params) price the route exactly, so a
    budget and cheapest-first work on a model_list as written."""
    fake.script("a", Reply("ok", usage=(1000, 100)))
    fake.script("b", Reply("ok", usage=(1000, 100)))
    a = deployment(fake, "a")
    a["model_info"].update(input_cost_per_token=2e-06, output_cost_per_token=8e-06)
    b = deployment(fake, "b", input_cost_per_token=1e-06, output_cost_per_token=4e-06)
    router = Router.from_litellm_model_list([a, b], budget=Budget("1.00"), order="cheapest")
    routed = router.route(model="gpt", messages=MESSAGES, max_tokens=100)
    assert routed.route.name == "openai/b"
    assert routed.cost == Money(1000 * 1 + 100 * 4)
    price = router.routes[0].prices.price_for("openai/a")
    assert (price.input, price.output) == (2_000_000, 8_000_000)  # $2 and $8 per million


def test_order_retries_and_what_is_not_applied(fake: FakeProvider) -> None:
    """order sorts the group; num_retries becomes the route's Retry; weight, tags and
    max_parallel_requests are listed by check() with their place."""
    fake.script("first", Fail(503), Reply("second time lucky"))
    entries = [
        deployment(fake, "second", order=2, weight=3),
        deployment(fake, "first", order=1, num_retries=1, tags=["eu"]),
        deployment(fake, "third", max_parallel_requests=4),
    ]
    router = Router.from_litellm_model_list(entries)
    assert [r.name for r in router.routes] == ["openai/first", "openai/second", "openai/third"]
    routed = router.route(model="gpt", messages=MESSAGES)
    assert [a.route for a in routed.journey.attempts] == ["openai/first", "openai/first"]
    problems = router.check()
    assert any(p.startswith("model_list[0]: weight is not applied") for p in problems)
    assert any(p.startswith("model_list[1]: tags is not applied") for p in problems)
    assert any(p.startswith("model_list[2]: max_parallel_requests is not applied") for p in problems)


PROXY_CONFIG = """
model_list:
  - model_name: gpt
    litellm_params:
      model: openai/primary
      api_base: {base}
      api_key: os.environ/FAKE_KEY
    model_info:
      supports_function_calling: true
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
  - model_name: gpt
    litellm_params:
      model: openai/backup
      api_base: {base}
      api_key: os.environ/FAKE_KEY
      weight: 2
    model_info:
      supports_function_calling: true
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
router_settings:
  routing_strategy: latency-based-routing
  num_retries: 1
  allowed_fails: 1
  cooldown_time: 45
  timeout: 30
  fallbacks: [{{"gpt": ["other"]}}]
litellm_settings:
  drop_params: true
  success_callback: ["langfuse"]
general_settings:
  master_key: sk-1234
"""


def test_a_litellm_proxy_config_loads_with_from_config_and_check(
    fake: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """model_list, router_settings and litellm_settings are taken where they apply; what
    does not apply is listed by `check` (exit 1), never dropped in silence."""
    monkeypatch.setenv("FAKE_KEY", f"{KEY_PREFIX}proxy")
    path = tmp_path / "config.yaml"
    path.write_text(PROXY_CONFIG.format(base=fake.base_url))
    router = Router.from_config(path)
    route = router.routes[0]
    assert route.kwargs["timeout"] == 30 and route.kwargs["drop_params"] is True
    fake.script("primary", Fail(503), Fail(503))
    routed = router.route(model="gpt", messages=MESSAGES, max_tokens=5)
    # num_retries 1: two requests to primary; allowed_fails 1: it then rests 45 s.
    assert [a.route for a in routed.journey.attempts] == ["openai/primary"] * 2 + ["openai/backup"]
    assert 40 < router.resting()["openai/primary"] <= 45
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    for note in (
        "router_settings.fallbacks is not applied",
        "litellm_settings.success_callback is not applied",
        "general_settings is not applied",
        "model_list[1]: weight is not applied",
    ):
        assert note in out
    assert "sk-1234" not in out


def test_money_in_yaml_is_read_exactly_from_its_text(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cap: 5.10` is 5.10 to the micro, not a binary float near it; toml alike."""
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    text = f"""
groups:
  g:
    routes:
      - model: openai/a
        api_base: {fake.base_url}
        api_key: os.environ/FAKE_KEY
        capabilities: {{tools: true}}
budget: {{cap: 5.10}}
deadline: 2.5
"""
    (tmp_path / "p.yaml").write_text(text)
    router = Router.from_config(tmp_path / "p.yaml")
    assert router.spending().cap == Money(5_100_000)
    (tmp_path / "p.toml").write_text(
        f'[budget]\ncap = 0.30\n[[groups.g.routes]]\nmodel = "openai/a"\n'
        f'api_base = "{fake.base_url}"\napi_key = "os.environ/FAKE_KEY"\n'
        "capabilities = {tools = true}\n"
    )
    assert Router.from_config(tmp_path / "p.toml").spending().cap == Money(300_000)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policy_router", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


@pytest.mark.slow
def test_the_cli_prints_no_traceback_for_a_users_mistake(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group that does not exist, a missing file, a bad flag: one line on stderr and exit 2;
    a reader that goes away (`prices | head -1`) ends quietly."""
    path = tmp_path / "p.yaml"
    path.write_text(
        f"groups:\n  g:\n    routes:\n      - model: openai/a\n        api_base: {fake.base_url}\n"
        "        api_key: sk-literal-1234\n        capabilities: {tools: true}\n"
    )
    # The four commands run at once: each is a fresh interpreter importing LiteLLM.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        mistakes = list(pool.map(lambda a: cli(*a), [("explain", str(path), "--model", "nope"), ("check", "missing.yaml")]))
        no_model = pool.submit(cli, "explain", str(path))
        piped_run = pool.submit(
            subprocess.run, f"{sys.executable} -m policy_router prices | head -1",
            shell=True, capture_output=True, text=True, timeout=60,
        )
        for done in mistakes:
            assert done.returncode == 2 and "Traceback" not in done.stderr
            lines = done.stderr.splitlines()
            assert lines[-1].startswith("error: ")
            assert all(line.startswith(("error: ", "warning: ")) for line in lines)
        assert no_model.result().returncode == 2  # argparse: --model is required
        piped = piped_run.result()
    assert piped.stdout.strip() == "per million tokens" and "Traceback" not in piped.stderr


def test_ctrl_c_ends_the_cli_with_130_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interrupt is said in one word, exit code 130."""
    import policy_router.cli.prices as cli_module

    def interrupted(*_: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "listing", interrupted)
    assert main(["prices"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_journeys_and_explanations_read_short_in_a_repr(fake: FakeProvider) -> None:
    """repr() of a journey, a Routed and an explanation is one short line, not a dump."""
    from .conftest import fake_route

    fake.script("a", Fail(503))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")])
    routed = router.route(model="g", messages=MESSAGES)
    assert repr(routed.journey) == (
        f"<Journey 'g': answered by openai/b after 2 requests, 0 skipped, "
        f"{routed.journey.elapsed:.2f} s>"
    )
    assert repr(routed).startswith("<Routed by 'openai/b' after 2 requests")
    assert repr(router.explain(model="g", messages=MESSAGES)) == (
        "<Explanation 'g': would try openai/a, openai/b; 0 skipped>"
    )


def test_restart_without_a_callback_is_refused(fake: FakeProvider) -> None:
    """stream_failure='restart' needs on_restart: a plain reader would get spliced text."""
    from .conftest import fake_route

    with pytest.raises(ConfigError, match="needs on_restart"):
        Router([fake_route(fake, "a")], stream_failure="restart")


def test_model_info_mode_says_what_a_deployment_serves(fake: FakeProvider) -> None:
    """mode: embedding makes a route serve embeddings only; a chat call skips it."""
    embed = deployment(fake, "embedder")
    embed["model_info"] = {"mode": "embedding"}
    router = Router.from_litellm_model_list([embed, deployment(fake, "chatty")])
    routed = router.route(model="gpt", messages=MESSAGES)
    assert routed.route.name == "openai/chatty"
    assert routed.journey.skips[0].reason == "cannot do chat"
    vectors = router.route(model="gpt", endpoint="embedding", input=["x"])
    assert vectors.route.name == "openai/embedder"


# -- a proxy config with nothing dropped in silence ---------------------------------------------
def _write(path: Path, data: dict[str, Any]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(data))
    return path


def test_a_proxy_config_with_include_env_base_model_and_wildcards(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """`include:` brings its groups, `environment_variables:` resolves the file's own
    references, `model_info.base_model` makes an Azure deployment usable and priced as the
    model it serves, both sections setting one knob is said, and a wildcard is listed."""
    _write(
        tmp_path / "models.yaml",
        {"model_list": [{"model_name": "extra", "litellm_params": {
            "model": "openai/extra", "api_base": fake.base_url, "api_key": "os.environ/PR_KEY"},
            "model_info": {"supports_function_calling": True}}]},
    )
    config = _write(
        tmp_path / "config.yaml",
        {
            "include": ["models.yaml"],
            "environment_variables": {"PR_KEY": f"{KEY_PREFIX}from-file"},
            "model_list": [
                {"model_name": "az", "litellm_params": {"model": "azure/my-deployment",
                    "api_base": "https://example.openai.azure.com", "api_key": "os.environ/PR_KEY",
                    "api_version": "2024-10-21", "stream_timeout": 5, "max_budget": 10},
                 "model_info": {"base_model": "azure/gpt-4o", "team_id": "t1"}},
                {"model_name": "openai/*", "litellm_params": {"model": "openai/*"}},
            ],
            "router_settings": {"num_retries": 2, "timeout": 30},
            "litellm_settings": {"num_retries": 5, "request_timeout": 60},
        },
    )
    router = Router.from_config(config)
    assert {r.group for r in router.routes} == {"az", "extra"}
    assert "azure/my-deployment" not in router.unusable()
    problems = "\n".join(router.check())
    for said in ("stream_timeout", "max_budget", "model_info.team_id", "openai/*",
                 "litellm_settings.num_retries (5)", "litellm_settings.request_timeout (60)"):
        assert said in problems, said
    extra = next(r for r in router.routes if r.group == "extra")
    assert extra.kwargs["api_key"] == f"{KEY_PREFIX}from-file"
    out = router.completion(model="extra", messages=MESSAGES)
    assert out.choices[0].message.content and fake.requests() == 1


@pytest.mark.parametrize("key", sorted(__import__("litellm.types.router", fromlist=["GenericLiteLLMParams"]).GenericLiteLLMParams.model_fields))
def test_every_litellm_param_is_applied_or_listed(key: str) -> None:
    """Each of LiteLLM's own `litellm_params` keys (read from its types) is either passed
    on to LiteLLM, mapped onto the route, or listed by `check()` with its place."""
    from policy_router.config.proxy import proxy_config

    value: Any = 1 if "cost" in key or key in ("rpm", "tpm", "order", "max_retries") else "x"
    params = {"model": "openai/gpt-4o-mini", key: value} if key != "model" else {"model": "openai/gpt-4o-mini"}
    try:
        loaded = proxy_config({"model_list": [{"model_name": "g", "litellm_params": params}]})
    except ConfigError as refused:  # refused before anything runs, naming the key or the fix
        assert key in str(refused) or ("cost" in key and "input_cost_per_token" in str(refused))
        return
    (route,) = loaded.routes
    mapped = {"model", "rpm", "tpm", "order", "max_retries", "num_retries"}
    applied = (
        key in route.kwargs
        or key in mapped
        or route.prices is not None
        or any(f".{key}" in note or f" {key} " in note for note in loaded.notes)
    )
    assert applied, (key, loaded.notes)


def _example_configs() -> list[Path]:
    import re

    import litellm

    root = Path(litellm.__file__).parent
    return sorted(
        p for p in root.rglob("*.yaml") if re.search(r"^model_list:", p.read_text(), re.M)
    )


# LiteLLM's own Router cannot route these either (no litellm_params; or only wildcards,
# which this router lists rather than routes): refused, with what is wrong.
_REFUSED = {
    "langfuse_config.yaml": "model_list[0].litellm_params: model is missing",
    "wildcard_config.yaml": "no deployment the router can send to",
}


@pytest.mark.parametrize("path", _example_configs(), ids=lambda p: p.name)
def test_every_example_config_of_the_installed_litellm_loads(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example proxy config the litellm package ships builds a router, its proxy-only
    sections (guardrails, mcp_servers, files_settings, search_tools, ...) listed by
    `check()` as not applied; the two LiteLLM could not route either are refused cleanly."""
    import re

    text = path.read_text()
    for name in set(re.findall(r"os\.environ/([A-Za-z_][A-Za-z0-9_]*)", text)):
        monkeypatch.setenv(name, f"sk-example-{name.lower()}-0000")
    if path.name in _REFUSED:
        with pytest.raises(ConfigError, match=re.escape(_REFUSED[path.name])):
            Router.from_config(path)
        return
    router = Router.from_config(path)
    notes = router.check()
    sections = [
        k for k in re.findall(r"^([a-z_]+):", text, re.M)
        if k not in ("model_list", "router_settings", "litellm_settings", "environment_variables", "include")
    ]
    for section in sections:
        assert any(n.startswith(f"{section} is not applied") for n in notes), (section, notes)
    assert router.routes


def test_a_misspelt_section_is_refused_with_the_one_it_resembles(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "model_list:\n  - model_name: g\n    litellm_params: {model: openai/gpt-4o-mini, api_key: sk-x-0000}\n"
        "router_setings:\n  num_retries: 2\n"
    )
    with pytest.raises(ConfigError, match=r"router_setings.*did you mean 'router_settings'"):
        Router.from_config(path)


def test_a_proxy_config_with_merge_keys_loads_as_litellm_reads_it(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LiteLLM reads its proxy config with `yaml.safe_load`, so `<<: *defaults` in a
    deployment's litellm_params is an ordinary way to share settings: each deployment gets
    the shared ones, its own keys winning, and the router routes through both."""
    monkeypatch.setenv("FAKE_KEY", f"{KEY_PREFIX}merged")
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""
model_list:
  - model_name: gpt
    litellm_params: &defaults
      model: openai/primary
      api_base: {fake.base_url}
      api_key: os.environ/FAKE_KEY
      timeout: 30
    model_info: &info {{supports_function_calling: true}}
  - model_name: gpt
    litellm_params:
      <<: *defaults
      model: openai/backup
      timeout: 12
    model_info: *info
"""
    )
    router = Router.from_config(path)
    primary, backup = router.routes
    assert (primary.model, primary.kwargs["timeout"]) == ("openai/primary", 30)
    assert (backup.model, backup.kwargs["timeout"]) == ("openai/backup", 12)
    assert backup.kwargs["api_base"] == fake.base_url
    fake.script("primary", Fail(503))
    routed = router.route(model="gpt", messages=MESSAGES, max_tokens=5)
    assert [a.route for a in routed.journey.attempts] == ["openai/primary", "openai/backup"]
