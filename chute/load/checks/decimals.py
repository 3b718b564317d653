"""Decimals: `1.999` into Decimal(5, 2) is 1.99 to the engine's parsers; here digits past the
scale that are not 0, or more whole digits than the precision leaves, do not fit."""

from __future__ import annotations

import re

from chute.sql import quote_str


def holds(inner: str) -> bool:
    """Decimal(P, S), Decimal32(S) ... Decimal256(S)."""
    return inner.startswith("Decimal")


def conversion(text: str, inner: str) -> str:
    """Decimal(P, S) from text, NULL where the engine would drop digits past the scale
    (`1.999` into Decimal(5, 2) is 1.99) or the number has more than P - S digits before the
    point. Exponent notation is compared with its Float64 reading."""
    numbers = re.findall(r"\d+", inner)
    if inner.startswith("Decimal(") and len(numbers) >= 2:
        precision, scale = int(numbers[0]), int(numbers[1])
    elif numbers:  # Decimal32(S) and the like
        scale = int(numbers[-1])
        precision = {"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}.get(inner.split("(")[0], 38)
    else:
        precision, scale = 10, 0
    value = f"accurateCastOrNull({text}, {quote_str(inner)})"
    plain = f"trimBoth({text})"
    extra_digits = f"match({plain}, '^[-+]?[0-9]*\\\\.[0-9]{{{scale}}}[0-9]*[1-9]')"
    exponent = f"match({plain}, '[eE]')"
    # Compared as decimals: 99999999999999.9999 fits Decimal(18, 4), yet its Float64 is 1e14.
    digits = precision - scale
    whole = (
        f"abs({value}) >= toDecimal256('1{'0' * digits}', 0)"
        if digits < 76  # (10^76 is past Decimal256: compared as a float there)
        else f"abs(toFloat64({value})) > 1e{digits}"
    )
    exact_exponent = f"toFloat64OrNull({plain}) = toFloat64({value})"
    return f"if({extra_digits} OR {whole} OR ({exponent} AND NOT {exact_exponent}), NULL, {value})"


def typed_read(ident: str, inner: str) -> tuple[str, str] | None:
    """A typed file's Decimal column, read as its exact text: (String, SQL of the decimal or NULL)."""
    if not holds(inner):
        return None
    return "String", conversion(ident, inner)
