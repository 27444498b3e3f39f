"""Money in integer micro-units of a currency, and the tokens a provider billed.

No float ever touches a money path: amounts are integer micro-units of a currency
(`Money(150, "USD")` is $0.000150), parsed from decimal strings; a cost is rounded *up*
to the micro-unit, so a bill computed here is never below the true one.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from .errors import ConfigError

__all__ = ['MICROS', 'Money', 'Usage']


MICROS = 1_000_000



_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}



def _decimal(value: object, where: str) -> Decimal:
    """A non-negative decimal from a string or int; floats are refused, never rounded."""
    if isinstance(value, bool | float):
        raise ConfigError(
            f'{where} must be a decimal string like "0.15", got {value!r}: '
            "quote it, floats cannot hold prices exactly"
        )
    if not isinstance(value, str | int | Decimal):
        raise ConfigError(f'{where} must be a decimal string like "0.15", got {value!r}')
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ConfigError(f'{where} must be a decimal string like "0.15", got {value!r}') from None
    if not number.is_finite():
        raise ConfigError(f"{where} must be a finite amount, zero or more, got {value!r}")
    if number < 0:
        raise ConfigError(f"{where} must be zero or more, got {value!r}")
    return number



def _micros(value: object, where: str) -> int:
    number = _decimal(value, where) * MICROS
    if number != number.to_integral_value():
        raise ConfigError(f"{where}={value!r} has more than 6 decimal places; round it to micros")
    return int(number)



def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)



def _currency(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) != 3 or not value.isalpha():
        raise ConfigError(f'{where} must be a 3-letter currency code like "USD", got {value!r}')
    return value.upper()



@dataclass(frozen=True, slots=True)
class Money:
    """An amount in integer micro-units (millionths) of a currency. Never a float.

    `Money.parse("5.00", "USD")`; `str(Money(150, "USD"))` is `$0.000150`. Adding or
    comparing two amounts in different currencies raises `ValueError`.
    """

    micros: int
    """The amount in millionths of the currency (`Money(150)` is $0.000150)."""
    currency: str = "USD"
    """An ISO 4217 code, as the price tables and budgets name it."""

    @classmethod
    def parse(
        cls, amount: str | int | Decimal, currency: str = "USD", *, where: str = "amount"
    ) -> Money:
        """Parse a decimal amount ("5.00") in `currency` exactly, or raise `ConfigError`
        naming the setting as `where`."""
        return cls(_micros(amount, where), _currency(currency, "currency"))

    def _same(self, other: Money) -> None:
        if self.currency != other.currency:
            raise ValueError(f"cannot mix {self.currency} and {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.micros + other.micros, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.micros - other.micros, self.currency)

    def __lt__(self, other: Money) -> bool:
        self._same(other)
        return self.micros < other.micros

    def __le__(self, other: Money) -> bool:
        self._same(other)
        return self.micros <= other.micros

    @property
    def amount(self) -> Decimal:
        """The amount as an exact `Decimal` in whole currency units."""
        return Decimal(self.micros) / MICROS

    def __str__(self) -> str:
        sign = "-" if self.micros < 0 else ""
        units, micros = divmod(abs(self.micros), MICROS)
        text = f"{units}.{micros:06d}"
        symbol = _SYMBOLS.get(self.currency)
        return f"{sign}{symbol}{text}" if symbol else f"{sign}{text} {self.currency}"



@dataclass(kw_only=True, frozen=True, slots=True)
class Usage:
    """Tokens a provider billed for one call. Cache and reasoning counts are subsets.

    `cache_read` and `cache_write` are part of `prompt`, and `cache_write_1h` is the part of
    `cache_write` written to a one-hour cache; `reasoning` is part of `completion`, as in
    OpenAI's usage and LiteLLM's normalised usage. `prompt_audio` and `completion_audio` are
    the audio tokens among the uncached prompt and the reply; `tier` is the service tier the
    provider billed in (`"priority"`, `"flex"`; "" for the default).
    """

    prompt: int
    completion: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cache_write_1h: int = 0
    prompt_audio: int = 0
    completion_audio: int = 0
    tier: str = ""
