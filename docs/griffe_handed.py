"""A griffe extension for the API pages: a method a class hands to a part it holds
(`health = handed("_view", Inspection.health)`, see `policy_router.ground.handing`) is
documented as that part's method, under the class that offers it, with its signature and
docstring, as `help()` shows it."""

from __future__ import annotations

import ast
from typing import Any

import griffe


class Handed(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for module in _modules(pkg):
            for cls in module.classes.values():
                for name, member in list(cls.members.items()):
                    target = _handed_to(member)
                    if target is None:
                        continue
                    owner, method = target
                    found = _find(module, owner)
                    if found is not None and method in found.members:
                        cls.set_member(name, griffe.Alias(name, found.members[method], parent=cls))


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for sub in module.modules.values():
        if not sub.is_alias:
            found += _modules(sub)
    return found


def _handed_to(member: Any) -> tuple[str, str] | None:
    """(`Inspection`, `health`) for `health = handed("_view", Inspection.health)`."""
    if member.is_alias or not member.is_attribute or member.value is None:
        return None
    try:
        node = ast.parse(str(member.value), mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "handed"):
        return None
    if len(node.args) != 2 or not isinstance(node.args[1], ast.Attribute):
        return None
    owner = node.args[1].value
    return (owner.id, node.args[1].attr) if isinstance(owner, ast.Name) else None


def _find(module: griffe.Module, name: str) -> Any:
    """The class `name` as `module` imports it."""
    member = module.members.get(name)
    if member is None:
        return None
    try:
        return member.final_target if member.is_alias else member
    except griffe.AliasResolutionError:
        return None
