"""What changed between two configurations: groups and routes added, removed, changed, kept.

A route is known by its group and `id` (made unique as the router does), so a route whose
key was rotated, that was renamed, or whose settings moved is the same route, "changed",
and keeps its history; routes are shown by name. A group is "changed" when its routes (by
id and settings) or its ordering differ.
`Router.reconfigure` returns it; `policy-router diff OLD NEW` prints it for two files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ground.route import Route, identities

__all__ = ["Changes", "Reconfigured", "diff", "forgotten"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Changes:
    """Group and route names in each of four kinds, sorted. `changed` is False when the
    two configurations route every request alike (the other settings may still differ)."""

    groups_added: tuple[str, ...] = ()
    groups_removed: tuple[str, ...] = ()
    groups_changed: tuple[str, ...] = ()
    groups_kept: tuple[str, ...] = ()
    routes_added: tuple[str, ...] = ()
    routes_removed: tuple[str, ...] = ()
    routes_changed: tuple[str, ...] = ()
    routes_kept: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(
            self.groups_added or self.groups_removed or self.groups_changed
            or self.routes_added or self.routes_removed or self.routes_changed
        )

    def __str__(self) -> str:
        lines = []
        for kind in ("groups", "routes"):
            for what in ("added", "removed", "changed", "kept"):
                names: tuple[str, ...] = getattr(self, f"{kind}_{what}")
                if names:
                    lines.append(f"{kind} {what}: {', '.join(names)}")
        return "\n".join(lines) or "no groups and no routes"


@dataclass(frozen=True, slots=True)
class Reconfigured:
    """Told to observers when `Router.reconfigure` (or `reload`) swapped in a new
    configuration: what changed."""

    changes: Changes


def _setting(route: Route) -> tuple[Any, ...]:
    """What a route is configured as (its key included: a rotated key is a change)."""
    kwargs = tuple(sorted((k, repr(v)) for k, v in route.kwargs.items()))
    capabilities = tuple(sorted((c.value, v) for c, v in route.capabilities.items()))
    return (
        route.name, route.model, route.group, route.reach, route.reach_declared, route.enabled, route.rpm,
        route.tpm, route.output_limit, repr(route.retry), repr(route.prices), kwargs,
        capabilities,
    )


def _order_of(orders: Any, group: str) -> str:
    chosen = orders.get(group, "as_listed") if isinstance(orders, Mapping) else orders
    return repr(getattr(chosen, "value", chosen))


def diff(
    old_routes: Sequence[Route], old_order: Any, new_routes: Sequence[Route], new_order: Any
) -> Changes:
    """The changes from one set of routes and ordering to another."""
    old = {(r.group, r.id): r for r in identities(list(old_routes))}
    new = {(r.group, r.id): r for r in identities(list(new_routes))}
    changed = {k for k in old.keys() & new.keys() if _setting(old[k]) != _setting(new[k])}

    def groups(routes: Mapping[tuple[str, str], Route]) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        for key, r in routes.items():
            out.setdefault(r.group, []).append(key)
        return out

    def shown(keys: set[tuple[str, str]], where: Mapping[tuple[str, str], Route]) -> tuple[str, ...]:
        return tuple(sorted({where[k].name for k in keys}))

    old_groups, new_groups = groups(old), groups(new)
    groups_changed = {
        g
        for g in old_groups.keys() & new_groups.keys()
        if old_groups[g] != new_groups[g]
        or any(k in changed for k in new_groups[g])
        or _order_of(old_order, g) != _order_of(new_order, g)
    }
    shared_groups = old_groups.keys() & new_groups.keys()
    return Changes(
        groups_added=tuple(sorted(new_groups.keys() - old_groups.keys())),
        groups_removed=tuple(sorted(old_groups.keys() - new_groups.keys())),
        groups_changed=tuple(sorted(groups_changed)),
        groups_kept=tuple(sorted(shared_groups - groups_changed)),
        routes_added=shown(new.keys() - old.keys(), new),
        routes_removed=shown(old.keys() - new.keys(), old),
        routes_changed=shown(changed, new),
        routes_kept=shown((old.keys() & new.keys()) - changed, new),
    )


def forgotten(old_routes: Sequence[Route], new_routes: Sequence[Route]) -> set[str]:
    """The ids of the routes `old_routes` had that no group of `new_routes` has: their
    health is forgotten (an id still in another group keeps it)."""
    return {r.id for r in old_routes} - {r.id for r in new_routes}
