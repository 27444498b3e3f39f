"""Money, prices and dated tables: exact integers, validated input, honest sources."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy_router import ConfigError, Money, Price, PriceTable, Usage
from policy_router.drive.seam import model_info as transport

TABLE = {
    "currency": "USD",
    "as_of": "2026-11-01",
    "source": "https://example.com/pricing",
    "models": {"openai/m": {"input": "0.15", "output": "0.60", "cache_read": "0.075"}},
}


def test_money_is_exact_integer_micros() -> None:
    """Money parses decimal strings exactly and prints six places with the currency."""
    assert Money.parse("5.00") == Money(5_000_000, "USD")
    assert str(Money(150, "USD")) == "$0.000150"
    assert str(Money.parse("1.5", "eur")) == "€1.500000"
    assert str(Money.parse("2", "CHF")) == "2.000000 CHF"
    assert Money.parse("0.10") + Money.parse("0.20") == Money.parse("0.30")
    with pytest.raises(ValueError, match="cannot mix USD and EUR"):
        _ = Money(1, "USD") + Money(1, "EUR")


@pytest.mark.parametrize(
    ("amount", "match"),
    [
        (0.1, "floats cannot hold prices exactly"),
        ("0.0000001", "more than 6 decimal places"),
        ("-1", "must be zero or more"),
        ("lots", "decimal string"),
    ],
)
def test_money_refuses_what_it_cannot_hold_exactly(amount: Any, match: str) -> None:
    """A float, a sub-micro amount, a negative or a non-number is refused, never rounded."""
    with pytest.raises(ConfigError, match=match):
        Money.parse(amount)


def test_cost_prices_cache_and_reasoning_and_rounds_up() -> None:
    """Cached and written prompt tokens and reasoning tokens take their own rates."""
    price = Price(input="1.00", output="4.00", cache_read="0.10", cache_write="1.25", reasoning="8")
    usage = Usage(prompt=1000, completion=100, cache_read=400, cache_write=100, reasoning=50)
    # 500 plain x 1 + 400 x 0.10 + 100 x 1.25 + 50 x 8 + 50 x 4, per million tokens, in micros
    assert price.cost(usage) == 500 + 40 + 125 + 400 + 200
    assert Price(input="0.15", output="0").cost(Usage(prompt=1, completion=0)) == 1  # 0.15 micro rounds up


def test_long_context_tier_applies_above_its_threshold() -> None:
    """Prompts over long_above tokens are billed, and bounded, at the long-context rates."""
    price = Price(input="1", output="2", long_above=100, long_input="3", long_output="5")
    assert price.cost(Usage(prompt=100, completion=10)) == 100 + 20
    assert price.cost(Usage(prompt=101, completion=10)) == 303 + 50
    assert price.worst_case(50, 10) == 150 + 50


usage_strategy = st.builds(
    lambda p, c, r, w, z, h: Usage(
        prompt=p, completion=c, cache_read=min(r, p), cache_write=min(w, p - min(r, p)), reasoning=min(z, c), cache_write_1h=min(h, min(w, p - min(r, p)))
    ),
    st.integers(0, 10**6),
    st.integers(0, 10**5),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**5),
    st.integers(0, 10**6),
)
rate = st.decimals(min_value=0, max_value=100, places=6).map(str)
maybe = st.one_of(st.none(), rate)


@given(
    usage_strategy,
    rate,
    rate,
    st.fixed_dictionaries(
        {
            "cache_read": maybe,
            "cache_write": maybe,
            "cache_write_1h": maybe,
            "reasoning": maybe,
        }
    ),
    st.one_of(
        st.none(),
        st.tuples(
            st.integers(1, 10**6),
            st.fixed_dictionaries(
                {
                    "long_input": maybe,
                    "long_output": maybe,
                    "long_cache_read": maybe,
                    "long_cache_write": maybe,
                    "long_cache_write_1h": maybe,
                }
            ),
        ),
    ),
)
def test_worst_case_bounds_every_bill_within_the_bounds(
    usage: Usage, i: str, o: str, rates: dict[str, str | None], tier: Any
) -> None:
    """With every rate a bill can carry (cache reads, five-minute and one-hour cache
    writes, reasoning, each in a long-context tier too), no usage within the prompt and
    reply bounds costs more than the worst case."""
    extra = {k: v for k, v in rates.items() if v is not None}
    if tier is not None:
        extra["long_above"] = tier[0]
        extra.update({k: v for k, v in tier[1].items() if v is not None})
    price = Price(input=i, output=o, **extra)
    assert price.cost(usage) <= price.worst_case(usage.prompt, usage.completion)


def test_a_long_prompt_with_cache_writes_stays_within_its_bound() -> None:
    """Claude Sonnet 4.5's rates, long tier included: a 300k-token prompt written to the
    one-hour cache bills long_cache_write_1h, and the worst case still covers it (the
    bound ignored the cache-write rates before and fell short)."""
    sonnet = Price(
        input="3",
        output="15",
        cache_read="0.30",
        cache_write="3.75",
        cache_write_1h="6.00",
        long_above=200_000,
        long_input="6",
        long_output="22.50",
        long_cache_read="0.60",
        long_cache_write="7.50",
        long_cache_write_1h="12",
    )
    usage = Usage(prompt=300_000, completion=1_000, cache_write=300_000, cache_write_1h=100_000)
    bill = sonnet.cost(usage)
    assert bill == 200_000 * 75 // 10 + 100_000 * 12 + 1_000 * 225 // 10  # micros
    assert sonnet.worst_case(300_000, 1_000) >= bill
    assert sonnet.worst_case(300_000, 1_000) == 300_000 * 12 + 1_000 * 225 // 10


def test_tables_without_the_new_rates_load_unchanged(tmp_path: Path) -> None:
    """A table written before the one-hour and long-context cache rates still loads, and
    its rows bill as they did."""
    path = tmp_path / "old.toml"
    path.write_text(
        'currency = "USD"\nas_of = "2025-12-01"\nsource = "old"\n'
        '[models."m"]\ninput = "1"\noutput = "2"\ncache_read = "0.5"\n'
    )
    price = PriceTable.load(path).rows["m"]
    assert price.cost(Usage(prompt=10, completion=10, cache_read=4)) == 6 + 2 + 20


def test_table_loads_from_toml_yaml_and_dict(tmp_path: Path) -> None:
    """The three shapes give the same table."""
    toml = tmp_path / "p.toml"
    toml.write_text(
        'currency = "USD"\nas_of = 2026-11-01\nsource = "https://example.com/pricing"\n'
        '[models."openai/m"]\ninput = "0.15"\noutput = "0.60"\ncache_read = "0.075"\n'
    )
    yaml = tmp_path / "p.yaml"
    yaml.write_text(
        'currency: USD\nas_of: "2026-11-01"\nsource: https://example.com/pricing\n'
        'models:\n  openai/m: {input: "0.15", output: "0.60", cache_read: "0.075"}\n'
    )
    tables = [PriceTable.load(toml), PriceTable.load(yaml), PriceTable.from_dict(TABLE)]
    assert {t.rows["openai/m"] for t in tables} == {Price("0.15", "0.60", cache_read="0.075")}
    assert {t.as_of for t in tables} == {dt.date(2026, 11, 1)}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("currency"), "missing 'currency'"),
        (lambda d: d.update(currency="dollars"), "3-letter currency code"),
        (
            lambda d: d["models"]["openai/m"].update(input="-1"),
            r"models.'openai/m'.input must be zero or more",
        ),
        (
            lambda d: d["models"]["openai/m"].update(output=0.6),
            r"models.'openai/m'.output must be a decimal string",
        ),
        (
            lambda d: d["models"]["openai/m"].update(inptu="1"),
            r"models.'openai/m'.inptu is not a price field",
        ),
        (lambda d: d["models"]["openai/m"].pop("output"), "missing 'output'"),
        (lambda d: d.update(vendor="x"), "unknown key 'vendor'"),
        (lambda d: d.update(as_of="last week"), "as_of must be a date"),
    ],
)
def test_bad_tables_name_the_row_and_field(change: Any, match: str) -> None:
    """Every malformed table raises ConfigError naming where and what to fix."""
    data = {**TABLE, "models": {"openai/m": dict(TABLE["models"]["openai/m"])}}
    change(data)
    with pytest.raises(ConfigError, match=match):
        PriceTable.from_dict(data)


def test_duplicate_rows_are_refused_in_yaml_and_toml(tmp_path: Path) -> None:
    """A model listed twice is an error, not a silent last-one-wins."""
    yaml = tmp_path / "dup.yaml"
    yaml.write_text(
        "currency: USD\nas_of: '2026-11-01'\nsource: s\nmodels:\n"
        "  openai/m: {input: '1', output: '1'}\n  openai/m: {input: '2', output: '2'}\n"
    )
    with pytest.raises(ConfigError, match="duplicate key 'openai/m' \\(line 6\\)"):
        PriceTable.load(yaml)
    toml = tmp_path / "dup.toml"
    toml.write_text(
        'currency = "USD"\nas_of = "2026-11-01"\nsource = "s"\n'
        '[models."openai/m"]\ninput = "1"\noutput = "1"\n'
        '[models."openai/m"]\ninput = "2"\noutput = "2"\n'
    )
    with pytest.raises(ConfigError, match="not valid TOML"):
        PriceTable.load(toml)


def test_shipped_default_table_says_where_and_when_its_figures_come_from() -> None:
    """The packaged table loads, names the LiteLLM release its rates came from, and dates
    them; it prices chat and embedding models of five providers."""
    table = PriceTable.default()
    assert table.currency == "USD"
    providers = {m.split("/")[0] for m in table.rows}
    assert {"openai", "anthropic", "gemini", "mistral", "deepseek"} <= providers
    assert table.source.startswith("litellm ") and "model_cost map" in table.source
    assert "openai/text-embedding-3-small" in table.rows
    assert table.age_days(table.as_of + dt.timedelta(days=30)) == 30


def test_rows_imported_from_litellm_are_marked_and_exact() -> None:
    """from_litellm converts LiteLLM's per-token floats to exact per-million rates."""
    table = PriceTable.from_litellm(["openai/gpt-4o-mini"], as_of="2026-11-29")
    assert "model_cost map (imported)" in table.source
    assert table.rows["openai/gpt-4o-mini"] == Price(
        "0.15", "0.6", cache_read="0.075",
        priority={"input": "0.25", "output": "1", "cache_read": "0.125"},
    )
    with pytest.raises(ConfigError, match="no prices for 'my-own' for provider 'openai'"):
        PriceTable.from_litellm(["openai/my-own"], as_of="2026-11-29")


def test_token_counting_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting a prompt for a model LiteLLM would fetch a tokenizer for opens no socket."""
    monkeypatch.delenv("LITELLM_OFFLINE_MODE", raising=False)
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    kwargs = {"model": "openai/llama-3-8b", "messages": [{"role": "user", "content": "hi " * 50}]}
    assert transport.count_tokens(kwargs) > 50
    assert attempts == []
