"""Prices as maintained data: the shipped table agrees with LiteLLM's map, tables are
imported, shown and compared from the command line, and check warns before a model
retires."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy_router import ConfigError, Price, PriceTable, Route, Router
from policy_router.cli.main import main
from policy_router.config.price_tools import diff, import_litellm, to_toml
from policy_router.ground import catalog as transport
from policy_router.testing import FakeProvider

from .conftest import KEY_PREFIX, MESSAGES


@pytest.mark.parametrize("model", sorted(PriceTable.default().rows))
def test_every_shipped_row_equals_litellms_map(model: str) -> None:
    """A bump of the pinned litellm shows each price change here, as a failure to review."""
    key, entry = transport.cost_map_entry(model)
    assert key == model
    assert PriceTable.default().rows[model] == Price.from_litellm(entry)


def test_the_shipped_table_names_the_litellm_it_came_from() -> None:
    table = PriceTable.default()
    assert table.source == f"litellm {transport.litellm_version()} model_cost map"


def test_rates_come_from_the_map_the_named_litellm_ships_not_a_fetched_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without LITELLM_LOCAL_MODEL_COST_MAP, LiteLLM replaces its map at import with one it
    downloads: an import labelled "litellm 1.110.2" must still carry 1.110.2's rates, and
    the shipped table must still agree with them."""
    import litellm

    fetched = {k: dict(v) if isinstance(v, dict) else v for k, v in litellm.model_cost.items()}
    fetched["gpt-4o-mini"]["input_cost_per_token"] = 9e-06  # a newer map, moved on
    monkeypatch.setattr(litellm, "model_cost", fetched)
    out = tmp_path / "prices.toml"
    args = ["prices", "import", "litellm", "openai/gpt-4o-mini", "--as-of", "2026-11-30"]
    assert main([*args, "--out", str(out)]) == 0
    row = PriceTable.load(out).rows["openai/gpt-4o-mini"]
    assert row == PriceTable.default().rows["openai/gpt-4o-mini"]
    assert 'input = "0.15"' in out.read_text()


def test_import_writes_a_dated_reviewable_table_that_loads_back(tmp_path: Path) -> None:
    """Exact decimals, every rate, the threshold before the rates it opens; the file loads
    back to the same rows."""
    out = tmp_path / "prices.toml"
    assert (
        main(
            [
                "prices",
                "import",
                "litellm",
                "gemini/gemini-2.5-pro",
                "anthropic/claude-sonnet-4-5",
                "--as-of",
                "2026-11-30",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = out.read_text()
    assert 'as_of = "2026-11-30"' in text and "litellm 1.110.2 model_cost map" in text
    assert 'output = "10"' in text and "E+" not in text
    assert text.index("long_above = 200000") < text.index('long_input = "2.5"')
    assert 'cache_write_1h = "6"' in text
    loaded = PriceTable.load(out)
    assert (
        loaded.rows
        == import_litellm(
            ["gemini/gemini-2.5-pro", "anthropic/claude-sonnet-4-5"], as_of="2026-11-30"
        ).rows
    )


def test_import_checks_the_provider() -> None:
    """The bare key gemini-2.5-pro is Vertex's row; asked for Gemini, the Gemini row comes
    (Vertex's carries a long-context cache-write rate Gemini's does not)."""
    gemini = import_litellm(["gemini-2.5-pro"], as_of="2026-11-30", provider="gemini")
    bare = import_litellm(["gemini-2.5-pro"], as_of="2026-11-30")
    assert list(gemini.rows) == ["gemini/gemini-2.5-pro"]
    assert list(bare.rows) == ["vertex_ai/gemini-2.5-pro"]
    assert gemini.rows["gemini/gemini-2.5-pro"].long_cache_write is None
    assert bare.rows["vertex_ai/gemini-2.5-pro"].long_cache_write is not None


@pytest.mark.slow
def test_import_of_an_unknown_model_names_close_matches_without_a_traceback(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "policy_router",
            "prices",
            "import",
            "litellm",
            "openai/gpt-4o-mni",
            "--as-of",
            "2026-11-30",
            "--out",
            str(tmp_path / "x.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "close matches: openai/gpt-4o-mini" in done.stderr
    assert not (tmp_path / "x.toml").exists()


def _table(rows: dict[str, dict[str, str]]) -> PriceTable:
    return PriceTable.from_dict(
        {"currency": "USD", "as_of": "2026-11-01", "source": "t", "models": rows}
    )


def test_diff_names_each_moved_rate_with_direction_and_percentage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Changed rates, added and removed models, the unchanged count; exit 1 on any change,
    0 when nothing moved (so it can gate a CI job)."""
    old = _table(
        {
            "m/a": {"input": "0.40", "output": "2"},
            "m/b": {"input": "1", "output": "1"},
            "m/gone": {"input": "1", "output": "1"},
        }
    )
    new = _table(
        {
            "m/a": {"input": "1.50", "output": "1", "cache_read": "0.15"},
            "m/b": {"input": "1", "output": "1"},
            "m/new": {"input": "2", "output": "2"},
        }
    )
    result = diff(old, new)
    assert result.lines() == [
        "changed m/a: input 0.4 -> 1.5 (up 275.0%); output 2 -> 1 (down 50.0%); cache_read - -> 0.15",
        "added   m/new",
        "removed m/gone",
        "1 changed, 1 added, 1 removed, 1 unchanged",
    ]
    (tmp_path / "old.toml").write_text(to_toml(old))
    (tmp_path / "new.toml").write_text(to_toml(new))
    assert main(["prices", "diff", str(tmp_path / "old.toml"), str(tmp_path / "new.toml")]) == 1
    assert "up 275.0%" in capsys.readouterr().out
    assert main(["prices", "diff", str(tmp_path / "new.toml"), str(tmp_path / "new.toml")]) == 0
    assert main(["prices", "diff", str(tmp_path / "new.toml"), str(tmp_path / "nope.toml")]) == 2


def test_show_prints_every_rate_with_its_date_and_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["prices", "show", "anthropic/claude-sonnet-4-5"]) == 0
    out = capsys.readouterr().out
    for line in (
        "input                3",
        "cache_write          3.75",
        "cache_write_1h       6",
        "as of                2026-11-30",
        "source               litellm 1.110.2",
    ):
        assert line in out
    assert main(["prices", "show", "anthropic/claude-sonet-4-5"]) == 2
    assert main(["prices", "show", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["model"] for r in rows} == set(PriceTable.default().rows)


def test_check_warns_before_a_model_retires_and_about_latest_aliases(fake: FakeProvider) -> None:
    """LiteLLM dates claude-sonnet-4-5's deprecation 2026-11-30; a -latest alias moves."""
    table = PriceTable.default()
    router = Router(
        [
            Route("anthropic/claude-sonnet-4-5", api_key="k", prices=table),
            Route("mistral/mistral-medium-latest", api_key="k", prices=table),
            Route("openai/gpt-4o-mini", api_key="k", prices=table),
        ]
    )
    found = router.check(today=dt.date(2026, 11, 20))
    assert (
        "anthropic/claude-sonnet-4-5: LiteLLM dates anthropic/claude-sonnet-4-5's deprecation "
        "2026-11-30 (in 10 days); move it to its successor before it stops answering"
    ) in found
    assert any("priced under the alias 'mistral/mistral-medium-latest'" in p for p in found)
    assert not any(p.startswith("openai/gpt-4o-mini") for p in found)  # dated 2027-01-14
    later = router.check(today=dt.date(2026, 12, 5))
    assert any("2026-11-30 (5 days ago)" in p for p in later)


def test_a_config_may_price_from_litellms_map_as_it_loads(
    fake: FakeProvider,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """price_tables: {live: litellm} builds the table from LiteLLM's map on load, dated
    today and naming the litellm version; prices and check say so."""
    monkeypatch.setenv("FAKE_KEY", f"{KEY_PREFIX}x")
    path = tmp_path / "p.yaml"
    path.write_text(
        "price_tables: {live: litellm}\n"
        "budget: {cap: '1.00'}\n"
        "groups:\n  g:\n    routes:\n"
        f"      - {{model: openai/gpt-4o-mini, api_base: '{fake.base_url}', api_key: os.environ/FAKE_KEY,"
        " prices: live, reach: on_device}\n"
    )
    router = Router.from_config(path)
    table = router.routes[0].prices
    assert table.as_of == dt.date.today() and "read when the config loaded" in table.source
    assert table.price_for("openai/gpt-4o-mini") == PriceTable.default().rows["openai/gpt-4o-mini"]
    router.completion(model="g", messages=MESSAGES, max_tokens=5)
    assert router.spending().calls == 1
    assert main(["prices", str(path)]) == 0
    assert "read when the config loaded" in capsys.readouterr().out
    main(["check", str(path)])
    assert "price tables:\n  live: as of" in capsys.readouterr().out


def test_an_unknown_model_in_an_import_raises_with_close_matches() -> None:
    with pytest.raises(ConfigError, match="close matches: openai/gpt-4o-mini"):
        import_litellm(["openai/gpt-4o-mni"], as_of="2026-11-30")


def test_the_command_line_says_what_a_user_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`prices CONFIG --json` lists the rows in use once; `report` on a file that is not a
    log is one line and exit 2; `check` suggests the model a typo meant and the key a
    misspelling meant; every verb and flag has help text."""
    import json as json_

    config = tmp_path / "c.yaml"
    config.write_text(
        "groups:\n  smart:\n    routes:\n"
        "      - {model: openai/gpt-4o-mini, prices: default}\n"
        "      - {model: openai/gpt-4o, prices: default}\n"
    )
    assert main(["prices", str(config), "--json"]) == 0
    rows = json_.loads(capsys.readouterr().out)
    assert sorted(r["model"] for r in rows) == ["openai/gpt-4o", "openai/gpt-4o-mini"]
    junk = tmp_path / "junk.txt"
    junk.write_text("hello")
    assert main(["report", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an attempt log" in err
    typo = tmp_path / "typo.yaml"
    typo.write_text("groups:\n  smart:\n    routes:\n      - {model: openai/gtp-4o-mini}\n")
    main(["check", str(typo)])
    assert "did you mean openai/gpt-4o-mini" in capsys.readouterr().out
    key = tmp_path / "key.yaml"
    key.write_text("groups:\n  smart:\n    routes:\n      - {modle: openai/gpt-4o-mini}\n")
    main(["check", str(key)])
    assert "'modle' a misspelling" in capsys.readouterr().out + capsys.readouterr().err
    for argv in (["check", "--help"], ["explain", "--help"], ["report", "--help"], ["prices", "--help"], ["prices", "import", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        assert (text and "  --" in text) or "positional" in text
        helpless = [line for line in text.splitlines() if line.strip().startswith("-") and line.strip().split()[-1].startswith("-")]
        assert not helpless, (argv, helpless)
