"""Values checked against their column's type, in SQL: what fits, the converted value, and why not.

The engine's text parsers wrap integers that do not fit, clamp dates and roll
clock times over; these expressions turn each of those into a NULL (does not
fit) that the careful pass reports, instead of a changed value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chute.load.checks.temporal import temporal_parts
from chute.sources.base import CheckedRead
from chute.sql import quote_ident, quote_str

INT_RE = re.compile(r"^U?Int(8|16|32|64|128|256)$")
SENTINEL_TEXT = "chute: a value is missing"
"""The message of a read that met a missing value while reading without the count (chute.load.checks.missing)."""


def strip_wrappers(type_sql: str) -> tuple[str, bool]:
    """(inner type, nullable) without LowCardinality(...) and Nullable(...)."""
    t = type_sql.strip()
    nullable = False
    for wrapper in ("LowCardinality(", "Nullable(", "LowCardinality("):
        if t.startswith(wrapper) and t.endswith(")"):
            nullable = nullable or wrapper == "Nullable("
            t = t[len(wrapper) : -1].strip()
    return t, nullable


def is_temporal(type_sql: str) -> bool:
    """Date, Date32, DateTime, DateTime64 (Nullable or not): types whose text the engine's
    parsers clamp or roll over rather than refuse."""
    inner, _ = strip_wrappers(type_sql)
    return inner in ("Date", "Date32") or inner.startswith("DateTime")


def checked(type_sql: str) -> bool:
    """Types whose text the engine's parsers change instead of refusing: integers wrap
    (`18446744073709551617` into UInt32 is 1), Float32 and Float64 overflow to inf
    (`1e39`, `1e400`), Decimal drops
    digits past its scale, dates and times clamp or roll over (`2024-02-30`, `25:61:61`),
    and a JSON `""` is 0. Their text is read as it is and converted by `conversion`."""
    inner, _ = strip_wrappers(type_sql)
    return (
        bool(INT_RE.match(inner))
        or inner in ("Float32", "Float64")
        or inner.startswith("Decimal")
        or is_temporal(type_sql)
        or array_element(inner) is not None
    )


def array_element(inner: str) -> str | None:
    """The element type of an Array whose elements are `checked` (at any depth), else None:
    the engine's readers wrap `[300]` into Array(UInt8) as they do a plain 300."""
    if inner.startswith("Array(") and inner.endswith(")"):
        element = inner[len("Array(") : -1].strip()
        if checked(element):
            return element
    return None


def read_as_text(type_sql: str) -> bool:
    """Whether a careful JSON read takes the column as text: the checked types, and UUID,
    whose reader, skipping a bad row, runs past a value shorter than a UUID into the next
    record (`"not-a-uuid"` loses the line after it)."""
    return checked(type_sql) or strip_wrappers(type_sql)[0] == "UUID"


def read_type(type_sql: str) -> str:
    """The type a careful JSON read parses a column as: `read_as_text` ones as text
    (converted and checked after), the rest as they are."""
    return "Nullable(String)" if read_as_text(type_sql) else type_sql


@dataclass(frozen=True)
class FastRead:
    """How the fast path reads a checked column of a text file (see `fast_read`)."""

    read_as: str
    """The type the parser reads the column as."""
    value: str
    """SQL of the column's value; fails the SELECT where the text does not fit."""
    fits: str
    """SQL: the text fits (or is missing)."""
    lenient: str
    """SQL of the value that never fails: the column's NULL or default where the text does not fit."""


def fast_read(
    name: str,
    type_sql: str,
    json: bool,
    null_marker: str = "",
    counted: bool = False,
    tsv: bool = False,
    whole_numbers: bool = False,
) -> FastRead | None:
    """How the fast path reads a checked column of a text file, or None to read it as its own type.

    A value that does not fit makes the SELECT fail, which sends the file to the careful
    pass (the same checks, row by row, with reasons). Integers of a CSV/TSV file are read
    as Int128 and cast exactly (as cheap as their own type; a CSV field is never the JSON
    `""`); the rest are read as text. Text that is missing (JSON: no key or null;
    CSV/TSV: an empty field) keeps the column's NULL or default, as the engine's own
    parser would give it.

    A `null_marker` (a Nullable column of a CSV/TSV file, see schema.NULL_MARKERS) is read as
    text whatever the type: the marker is NULL, every other value is converted and checked.

    `counted`: a missing value must show as NULL in the read column (chute.load.checks.missing counts
    it): integers are read Nullable too, and taken with assumeNotNull (the NULL's default).

    `whole_numbers`: JSON integers past 32 bits are read as text too, so that `1e2` and `1.0`
    are the whole numbers they are (the Int128 read refuses them; the Float64 read of narrower
    ones takes them): the pass that keeps bad rows, where a refused record is a rejected row.

    `tsv`: integers are read as text as well. The engine's TSV reader takes an empty field for
    0 (a CSV one takes the column's DEFAULT, which the missing-value probe sees): read as text,
    an empty field is a missing value, counted, like a date's.
    """
    if null_marker and not json:
        return _marker_read(name, type_sql, null_marker)
    if not checked(type_sql) or type_sql.startswith("LowCardinality("):
        return None
    inner, nullable = strip_wrappers(type_sql)
    ident = quote_ident(name)
    if array_element(inner) is not None:
        return int_array_read(ident, type_sql, inner) or _array_read(ident, type_sql, json)
    missing = "NULL" if nullable else default_of(inner)
    if inner == "Float64" and not whole_numbers:
        return _float64_read(ident, type_sql, nullable, counted, missing)
    match = None if tsv else INT_RE.match(inner)
    if match and int(match.group(1)) > 64:
        return None  # (read as it is: a wider read costs every row; see docs/loading.md)
    if match and whole_numbers and json and int(match.group(1)) > 32:
        match = None
    if match:
        bits = int(match.group(1))
        wide = "Float64" if bits <= 32 else "Int128"  # Float64 holds every 32-bit integer exactly
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
    conv = conversion(ident, type_sql)
    assert conv is not None
    absent = text_missing(ident, json, nullable)
    fits = f"bitOr({absent}, isNotNull({conv}))"
    value = conv if nullable else f"ifNull({conv}, {missing})"
    temporal = temporal_parts(ident, inner)
    if temporal is not None:
        # Parsed once, converted without if() (whose branches the engine would compute apart).
        wide, wide_fits, convert, zero = temporal
        fits = f"bitOr({absent}, ifNull({wide_fits}, 0))"  # (NULL text: NULL checks; bitOr keeps a NULL)
        strict = convert(wide if nullable else f"ifNull({wide}, {zero})")
        lenient = convert(f"if({fits}, {wide}, NULL)" if nullable else f"if({fits}, ifNull({wide}, {zero}), {zero})")
        return FastRead(
            "Nullable(String)" if json or nullable else "String",
            f"CAST({strict} + throwIf({fits} = 0, 'a value does not fit its column'), {quote_str(type_sql)})",
            f"({fits} != 0)",
            f"CAST({lenient}, {quote_str(type_sql)})",
        )
    # No if(): the conversion runs once per row, and throwIf (0 when the value fits) fails the SELECT.
    return FastRead(
        "Nullable(String)" if json or nullable else "String",
        f"CAST({plus_check(value, f'{fits} = 0', inner)}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST({value}, {quote_str(type_sql)})",
    )


def _float64_read(ident: str, type_sql: str, nullable: bool, counted: bool, missing: str) -> FastRead:
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


def plus_check(value: str, fails: str, inner: str, message: str = "'a value does not fit its column'") -> str:
    """SQL: `value`, failing the SELECT where `fails`. A float is multiplied by 1, not added 0:
    -0 + 0 is +0, the sign lost."""
    if inner.startswith(("Float", "BFloat")):
        return f"{value} * (1 - throwIf({fails}, {message}))"
    return f"{value} + throwIf({fails}, {message})"


def int_array_read(
    ident: str, type_sql: str, inner: str, message: str = "'a value does not fit its column'"
) -> FastRead | None:
    """An array (at any depth) of integers of up to 64 bits, read with Int128 elements and cast
    exactly, as a plain integer is (the text read of `_array_read` costs twice the load);
    None for other elements."""
    depth, element = 0, inner
    while element.startswith("Array("):
        depth, element = depth + 1, element[len("Array(") : -1].strip()
    base, nullable = strip_wrappers(element)
    match = INT_RE.match(base)
    if not match or int(match.group(1)) > 64 or element.startswith("LowCardinality("):
        return None
    wide = "Nullable(Int128)" if nullable else "Int128"
    for _ in range(depth):
        wide = f"Array({wide})"
    flat = ident if depth == 1 else f"arrayFlatten({ident})"
    exact = f"accurateCastOrNull(x, {quote_str(base)})"
    fits = f"arrayAll(x -> {'isNull(x) OR ' if nullable else ''}isNotNull({exact}), {flat})"
    checked_value = f"if(throwIf(NOT {fits}, {message}) = 0, {ident}, {ident})"
    return FastRead(
        wide,
        f"CAST({checked_value}, {quote_str(type_sql)})",
        fits,
        f"if({fits}, CAST({ident}, {quote_str(type_sql)}), CAST([], {quote_str(type_sql)}))",
    )


def _array_read(ident: str, type_sql: str, json: bool) -> FastRead:
    """An array of checked elements, read as its text (JSON's raw array; the text format of a
    CSV/TSV field) and converted element by element (`conversion`); a missing one is empty."""
    conv = conversion(ident, type_sql)
    fits = f"bitOr({text_missing(ident, json, False)}, isNotNull({conv}))"
    value = f"ifNull({conv}, '[]')"
    checked_value = f"if(throwIf({fits} = 0, 'a value does not fit its column') = 0, {value}, '[]')"
    return FastRead(
        "Nullable(String)" if json else "String",
        f"CAST({checked_value}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST(if({fits}, {value}, '[]'), {quote_str(type_sql)})",
    )


def array_conversion(text: str, element: str, depth: int = 0) -> str:
    """Nullable(String): the text of Array(`element`) converted exactly from `text`, NULL where
    it is no array or an element does not fit (CAST to the array type reads it back exactly).

    `text` is JSON, or the engine's text format of a CSV/TSV field, whose quotes are made JSON's
    (checked elements are numbers, dates and times: they hold no quote). A `null` element is
    NULL, or the element's default where it cannot be NULL, as the engine's reader has it."""
    x = f"__e{depth}"
    # (the text format writes NULL; its quotes are single)
    quoted = f"replaceAll(ifNull({text}, ''), {quote_str(chr(39))}, {quote_str(chr(34))})"
    as_json = f"replaceRegexpAll({quoted}, '\\\\bNULL\\\\b', 'null')"
    elements = f"JSONExtractArrayRaw({as_json})"
    inner, nullable = strip_wrappers(element)
    sub = array_element(inner)
    if sub is not None:
        conv = array_conversion(x, sub, depth + 1)
        value = f"CAST(ifNull({conv}, '[]'), {quote_str(inner)})"
    else:
        unquoted = f"if(startsWith({x}, {quote_str(chr(34))}), JSONExtractString({x}), {x})"
        scalar = conversion(unquoted, element)
        assert scalar is not None
        conv = scalar
        value = conv if nullable else f"assumeNotNull({conv})"
    null = "NULL" if nullable else default_of(inner)
    fits = (
        f"isValidJSON({as_json}) AND JSONType({as_json}) = 'Array' "
        f"AND arrayAll({x} -> {x} = 'null' OR isNotNull({conv}), {elements})"
    )
    return f"if({fits}, toString(arrayMap({x} -> if({x} = 'null', {null}, {value}), {elements})), NULL)"


def text_missing(ref: str, json: bool, nullable: bool) -> str:
    """SQL: the text of a column read as text by `fast_read` (`ref`: how the query names it) is
    missing, so the column takes its NULL or default: no key or null in JSON, an empty field
    (or `\\N`, which the parser reads as one) in CSV/TSV."""
    if json:
        return f"isNull({ref})"
    return f"empty(ifNull({ref}, ''))" if nullable else f"empty({ref})"


def read_as_text_by(fast: FastRead | CheckedRead) -> bool:
    """Whether `fast_read` reads the column as text (else wide: an integer as Int128 or Float64)."""
    return fast.read_as in ("String", "Nullable(String)")


def _marker_read(name: str, type_sql: str, marker: str) -> FastRead | None:
    """A Nullable column whose NULL is written `marker`: read as text, the marker NULL, the rest
    converted exactly (None for types without a check: read as they are, the marker then fails)."""
    text = f"nullIf({quote_ident(name)}, {quote_str(marker)})"
    inner, _ = strip_wrappers(type_sql)
    conv = conversion(text, type_sql)
    if conv is None or inner == "String":
        return None
    fits = f"bitOr(empty(ifNull({text}, '')), isNotNull({conv}))"
    checked_value = f"if(throwIf({fits} = 0, 'a value does not fit its column') = 0, {conv}, NULL)"
    return FastRead(
        "Nullable(String)",
        f"CAST({checked_value}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST(if({fits}, {conv}, NULL), {quote_str(type_sql)})",
    )


def conversion(text: str, type_sql: str) -> str | None:
    """SQL turning the String `text` into the inner type, NULL when it does not fit.

    None when the type has no exact check (arrays, maps, tuples): those are
    converted without a per-value check.
    """
    inner, _ = strip_wrappers(type_sql)
    if inner in ("String",):
        return text
    element = array_element(inner)
    if element is not None:
        return array_conversion(text, element)
    if inner.startswith("FixedString("):
        n = int(inner[len("FixedString(") : -1])
        return f"if(length({text}) <= {n}, {text}, NULL)"
    if inner.startswith("Enum"):
        # accurateCastOrNull throws on an unknown name: compare with the type's names and numbers first.
        names = re.findall(r"'((?:[^'\\]|\\.)*)'\s*=\s*(-?\d+)", inner)
        known = ", ".join(quote_str(n.replace("\\'", "'")) for n, _ in names)
        numbers = ", ".join(v for _, v in names)
        fits = f"({text} IN ({known}) OR toInt64OrNull({text}) IN ({numbers}))"
        # (the cast never sees an unknown name, even where both branches are computed)
        safe = f"if({fits}, {text}, {quote_str(names[0][0].replace(chr(92) + chr(39), chr(39)))})"
        return f"if({fits}, accurateCastOrNull({safe}, {quote_str(inner)}), NULL)"
    int_match = INT_RE.match(inner)
    if int_match and int(int_match.group(1)) > 64:
        # Past 64 bits the engine's string cast wraps too: the value must print back as its text.
        value = f"accurateCastOrNull({text}, {quote_str(inner)})"
        canonical = f"replaceRegexpOne(trimBoth({text}), '^(-?)[+]?0*([0-9])', '\\\\1\\\\2')"
        return f"if(toString({value}) = {canonical}, {value}, NULL)"
    if inner == "Float32":
        # Parsed as Float32 a number past its range is inf, one too small is 0: compare with Float64.
        f32, f64 = f"toFloat32OrNull({text})", f"toFloat64OrNull({text})"
        changed = f"(isInfinite({f32}) AND NOT isInfinite({f64})) OR ({f32} = 0 AND {f64} != 0)"
        return f"if({changed}, NULL, {f32})"
    if inner.startswith("Decimal"):
        return decimal_conversion(text, inner)
    if int_match:
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
    if inner == "Float64":
        # Parsed, a number past the range is inf (`1e400`): only the text of an infinity is one.
        f64 = f"toFloat64OrNull({text})"
        return f"if(isInfinite({f64}) AND positionCaseInsensitive({text}, 'inf') = 0, NULL, {f64})"
    if inner.startswith(("Float", "Bool", "BFloat16")):
        return f"accurateCastOrNull({text}, {quote_str(inner)})"
    temporal = temporal_parts(text, inner)
    if temporal is not None:
        wide, fits, convert, _ = temporal
        return f"if({fits}, {convert(wide)}, NULL)"
    if inner == "UUID":
        return f"toUUIDOrNull({text})"
    if inner in ("IPv4", "IPv6"):
        return f"to{inner}OrNull({text})"
    return None


def decimal_conversion(text: str, inner: str) -> str:
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


def default_of(type_sql: str) -> str:
    """SQL of the value a missing value takes: the type's default, except Date32's, whose
    defaultValueOfTypeName is 1900-01-01 where the engine's own reading (and a NULL's
    assumeNotNull) gives 1970-01-01, the zero the docs name."""
    if strip_wrappers(type_sql)[0] == "Date32":
        return "toDate32(0)"
    return f"defaultValueOfTypeName({quote_str(type_sql)})"
