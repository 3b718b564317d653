"""Strings and the scalars written as text: String, FixedString, UUID, IPv4, IPv6, Bool. Their
readers refuse what they cannot hold (a FixedString too long, a UUID that is none); the careful
pass checks them with the same casts, so that a bad value is a rejected row with its reason."""

from __future__ import annotations

from chute.sql import quote_str

TEXT_LIKE = ("UUID", "IPv4", "IPv6", "Bool")


def holds(inner: str) -> bool:
    return inner == "String" or inner.startswith("FixedString(") or inner in TEXT_LIKE


def conversion(text: str, inner: str) -> str:
    """SQL turning the String `text` into `inner`, NULL when it does not fit (a String is its text)."""
    if inner == "String":
        return text
    if inner.startswith("FixedString("):
        n = int(inner[len("FixedString(") : -1])
        return f"if(length({text}) <= {n}, {text}, NULL)"
    if inner == "UUID":
        return f"toUUIDOrNull({text})"
    if inner in ("IPv4", "IPv6"):
        return f"to{inner}OrNull({text})"
    return f"accurateCastOrNull({text}, {quote_str(inner)})"  # Bool
