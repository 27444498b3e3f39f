"""What `router.health()` and `router.usage()` return: the same dicts by route name, which
a notebook shows as a table (route, state, failures, seconds of rest left, last error; or
the rate window's figures) instead of raw records with clock readings in them."""

from __future__ import annotations

from collections.abc import Iterable

from ..state.store import Health
from ..state.windows import Window

__all__ = ["HealthTable", "UsageTable", "html_table"]


def _html(text: object) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def html_table(head: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """An HTML table of `rows` under `head`, every cell escaped."""
    top = "".join(f"<th>{_html(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{_html(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{top}</tr>{body}</table>"


class HealthTable(dict[str, Health]):
    """Every route's `Health` by name: a plain dict, shown in a notebook as a table of the
    route, its state, consecutive failures, the seconds of rest left and its last error
    (keys redacted, as in the records)."""

    def _repr_html_(self) -> str:
        return html_table(
            ("route", "state", "failures", "rest left", "last error"),
            (
                (
                    name,
                    h.state + (" (probing)" if h.probing else ""),
                    h.failures,
                    f"{h.rest_left:.1f} s" if h.rest_left else "",
                    h.last_error,
                )
                for name, h in self.items()
            ),
        )


class UsageTable(dict[str, Window]):
    """Every route's rate `Window` by name: a plain dict, shown in a notebook as a table
    of requests and tokens in the last minute, calls in flight, when the next slot frees
    and how long a provider's 429 closed it for."""

    def _repr_html_(self) -> str:
        return html_table(
            ("route", "requests", "tokens", "in flight", "frees in", "closed for"),
            (
                (
                    name,
                    w.requests,
                    f"{w.tokens:,}",
                    w.in_flight,
                    f"{w.frees_in:.1f} s" if w.frees_in else "",
                    f"{w.closed_for:.1f} s" if w.closed_for else "",
                )
                for name, w in self.items()
            ),
        )
