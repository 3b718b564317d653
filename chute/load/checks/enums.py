"""Enums: a name or number the type does not list does not fit (the engine's cast would throw,
failing the whole read, instead of refusing one value)."""

from __future__ import annotations

import re

from chute.sql import quote_str


def holds(inner: str) -> bool:
    """Enum8, Enum16."""
    return inner.startswith("Enum")


def conversion(text: str, inner: str) -> str:
    """SQL turning the String `text` into the Enum `inner`, NULL for a name or number it lacks."""
    # accurateCastOrNull throws on an unknown name: compare with the type's names and numbers first.
    names = re.findall(r"'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)", inner)
    known = ", ".join(quote_str(n.replace("\\'", "'")) for n, _ in names)
    numbers = ", ".join(v for _, v in names)
    fits = f"({text} IN ({known}) OR toInt64OrNull({text}) IN ({numbers}))"
    # (the cast never sees an unknown name, even where both branches are computed)
    safe = f"if({fits}, {text}, {quote_str(names[0][0].replace(chr(92) + chr(39), chr(39)))})"
    return f"if({fits}, accurateCastOrNull({safe}, {quote_str(inner)}), NULL)"
