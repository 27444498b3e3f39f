"""A method that hands its call to a collaborator the object holds.

A class built from parts (a router's lifecycle and its reading side, a Redis store's key
space) keeps its public methods where a user looks for them: `health = handed("_view",
Inspection.health)` is `Router.health`, with `Inspection.health`'s name, docstring and
signature (so `help()` and type checkers read the same), calling it on `router._view`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["handed"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def handed(to: str, method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method calling `method` on the collaborator held as attribute `to` (see the module
    docstring). `method` must take `self` positionally only (`def m(self, /, ...)`) when
    it also takes `**kwargs`, so the two cannot collide."""

    @functools.wraps(method)
    def hand(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, to), *args, **kwargs)

    return hand
