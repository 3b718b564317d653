"""Integers: `18446744073709551617` into UInt32 is 1 and `300` into UInt8 is 44 to the engine's
parsers (they wrap modulo 2^bits); here a value that does not fit is NULL, never another number."""

from __future__ import annotations

from chute.load.checks.types import INT_RE, FastRead
from chute.sql import quote_str


def holds(inner: str) -> bool:
    """(U)Int8 to (U)Int256."""
    return INT_RE.match(inner) is not None


def bits(inner: str) -> int:
    """The width of an integer type (0 for other types)."""
    match = INT_RE.match(inner)
    return int(match.group(1)) if match else 0


def conversion(text: str, inner: str) -> str:
    """SQL turning the String `text` into the integer type `inner`, NULL when it does not fit."""
    if bits(inner) > 64:
        # Past 64 bits the engine's string cast wraps too: the value must print back as its text.
        value = f"accurateCastOrNull({text}, {quote_str(inner)})"
        canonical = f"replaceRegexpOne(trimBoth({text}), '^(-?)[+]?0*([0-9])', '\\\\1\\\\2')"
        return f"if(toString({value}) = {canonical}, {value}, NULL)"
    # JSON true/false are 1/0, as the engine's JSON reader has them on the fast path.
    plain = f"accurateCastOrNull(multiIf({text} = 'true', '1', {text} = 'false', '0', {text}), {quote_str(inner)})"
    # A number written with a point or an exponent that is a whole number (`1.0`, `1e2`: pandas
    # writes an integer column with gaps so) is that number, as the fast path's Float64 read of
    # a JSON integer has it; `1.5` and `1e-40` do not fit.
    pointed = f"position({text}, '.') + positionCaseInsensitive({text}, 'e') > 0"  # (a regex costs 5x)
    odd = f"bitAnd({pointed}, {text} NOT IN ('true', 'false'))"
    # (the engine computes both branches of if() for every row: the costly one sees '' but where needed)
    t = f"trimBoth(if({odd}, {text}, ''))"
    fraction = f"trimRight(extract({t}, '[.]([0-9]*)'), '0')"  # its digits past the point, but 0s
    exponent = f"if(match({t}, '[eE]'), toInt64OrNull(extract({t}, '[eE]([-+]?[0-9]+)$')), 0)"
    value = f"accurateCastOrNull(toString(toDecimal256OrNull({t}, 0)), {quote_str(inner)})"
    number = f"isNotNull(toFloat64OrNull({t}))"  # (`.` alone is no number; its Decimal is 0)
    whole = f"if(bitAnd({exponent} BETWEEN length({fraction}) AND 40, {number}), {value}, NULL)"
    return f"if({odd}, {whole}, {plain})"


def wide_read(ident: str, type_sql: str, inner: str, nullable: bool, counted: bool, missing: str) -> FastRead:
    """An integer of up to 64 bits of a text file, read wide and cast exactly: as cheap as its
    own type. Float64 holds every 32-bit integer exactly (and takes JSON's `1e2`); wider ones
    are read as Int128. `counted`: read Nullable, a NULL taken as the default (`missing`)."""
    wide = "Float64" if bits(inner) <= 32 else "Int128"
    if counted and not nullable:
        ident = f"assumeNotNull({ident})"  # (no copy: the values under the NULLs are 0)
    exact = f"accurateCastOrNull({ident}, {quote_str(inner)})"
    fits = f"(isNull({ident}) OR isNotNull({exact}))"
    return FastRead(
        f"Nullable({wide})" if nullable or counted else wide,
        f"accurateCast({ident}, {quote_str(type_sql)})",
        fits,
        f"CAST(if({fits}, {exact}, {missing}), {quote_str(type_sql)})",
    )


def typed_read(ident: str, inner: str) -> tuple[str, str] | None:
    """A typed file's integer column: (the wide type to read it as, SQL of its exact value or
    NULL); None past 64 bits (read as it is) and for other types."""
    if not holds(inner) or bits(inner) > 64:
        return None
    return "Int128", f"accurateCastOrNull({ident}, {quote_str(inner)})"
