"""Floats: `1e39` into Float32 is inf to the engine's parsers, and `1e400` into Float64; here a
number past the type's range (or too small for Float32 that is not 0) does not fit, while the
text of an infinity (`inf`) is one."""

from __future__ import annotations

from chute.load.checks.types import FastRead, plus_check
from chute.sql import quote_str


def holds(inner: str) -> bool:
    """Float32, Float64, BFloat16."""
    return inner.startswith(("Float", "BFloat16"))


def conversion(text: str, inner: str) -> str:
    """SQL turning the String `text` into the float type `inner`, NULL when it does not fit."""
    if inner == "Float32":
        # Parsed as Float32 a number past its range is inf, one too small is 0: compare with Float64.
        # Past Float64's range too (`1e400`) both are inf: only the text of an infinity is one.
        f32, f64 = f"toFloat32OrNull({text})", f"toFloat64OrNull({text})"
        overflow = f"isInfinite({f32}) AND positionCaseInsensitive({text}, 'inf') = 0"
        changed = f"({overflow}) OR ({f32} = 0 AND {f64} != 0)"
        return f"if({changed}, NULL, {f32})"
    if inner == "Float64":
        # Parsed, a number past the range is inf (`1e400`): only the text of an infinity is one.
        f64 = f"toFloat64OrNull({text})"
        return f"if(isInfinite({f64}) AND positionCaseInsensitive({text}, 'inf') = 0, NULL, {f64})"
    return f"accurateCastOrNull({text}, {quote_str(inner)})"


def float64_read(ident: str, type_sql: str, nullable: bool, counted: bool, missing: str) -> FastRead:
    """Float64 read as itself (its text read costs the load twice): only an infinity may be a
    number past the range (`1e400`), so a file with one fails the fast read and the careful
    pass tells an overflow (a rejected row) from the text of an infinity (`inf`, a value)."""
    value = f"assumeNotNull({ident})" if counted and not nullable else ident
    infinite = f"isInfinite({value})"
    return FastRead(
        "Nullable(Float64)" if nullable or counted else "Float64",
        f"CAST({plus_check(value, infinite, 'Float64')}, {quote_str(type_sql)})",
        f"(isNull({ident}) OR NOT {infinite})",
        f"CAST(if({infinite}, {missing}, {value}), {quote_str(type_sql)})",
    )


def typed_read(ident: str, inner: str) -> tuple[str, str] | None:
    """A typed file's Float32 column, read as Float64: (that type, SQL of its Float32 or NULL
    where the narrowing makes it inf or 0); None for other types (read as they are)."""
    if inner != "Float32":
        return None
    f32 = f"toFloat32({ident})"
    changed = f"(isInfinite({f32}) AND NOT isInfinite({ident})) OR ({f32} = 0 AND {ident} != 0)"
    return "Float64", f"if({changed}, NULL, {f32})"
