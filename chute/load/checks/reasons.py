"""Why a value does not fit, in SQL: the reasons a rejected row carries, and the careful passes'
converted values (each column's `column.conversion`, its NULL or default where missing)."""

from __future__ import annotations

from chute.load.checks.column import conversion
from chute.load.checks.composite import nested_groups
from chute.load.checks.types import default_of, read_as_text, strip_wrappers
from chute.schema import Column
from chute.sql import internal, quote_ident, quote_str

PLAIN_SCALARS = frozenset({"Bool", "UUID", "IPv4", "IPv6", "Float64"})
"""Types a careful JSON read takes as they are whose refused value still gets a reason naming its column."""


def value_at(i: int) -> str:
    """The checked records' column of the i-th input column's converted value (chute.sql.internal)."""
    return internal(f"v{i}")


def present_at(i: int) -> str:
    """The checked records' flag: the i-th input column (one with a DEFAULT expression) had a value."""
    return internal(f"p{i}")


def unfit(name: str, shown: str, inner: str) -> str:
    """SQL of the reason `column <name>: <shown> does not fit <inner>` (`shown`: SQL of the value)."""
    return f"concat({quote_str(f'column {name}: ')}, {shown}, {quote_str(' does not fit ' + inner)})"


def unfit_named(name_sql: str, shown: str, inner: str) -> str:
    """`unfit` where SQL gives the column's name (a wide file's group of columns: chute.load.checks.wide)."""
    return f"concat('column ', {name_sql}, ': ', {shown}, {quote_str(' does not fit ' + inner)})"


def nested_reasons(columns: list[Column], lengths: list[str]) -> list[str]:
    """multiIf arms: the arrays of a Nested structure differ in length (`lengths`: SQL of
    each column's array length)."""
    parts = []
    for members in nested_groups(columns):
        first = members[0]
        differ = " OR ".join(f"{lengths[i]} != {lengths[first]}" for i in members[1:])
        names = ", ".join(columns[i].name for i in members)
        structure = columns[first].name.split(".")[0]
        parts += [differ, quote_str(f"the arrays of Nested {structure} ({names}) differ in length")]
    return parts


def multi_if(parts: list[str]) -> str:
    return f"multiIf({', '.join(parts)}, '')" if parts else "''"


def finals(columns: list[Column], texts: list[str], present: list[str], extract: list[str]) -> list[str]:
    """Converted value of each column, and the condition that it is bad."""
    return [
        f"{final_value(col, conversion(texts[i], col.type), present[i], extract[i])} AS {value_at(i)}"
        for i, col in enumerate(columns)
    ]


def final_value(col: Column, conv: str | None, present: str, extract: str) -> str:
    """SQL of a column's value in the careful passes: its text converted (`conv`, None for a type
    without a check: `extract`), its NULL or default where missing (not `present`)."""
    _, nullable = strip_wrappers(col.type)
    if conv is None:
        value = extract
    elif nullable:
        value = f"if({present}, {conv}, NULL)"
    elif strip_wrappers(col.type)[0].startswith("Array("):
        value = f"if({present}, ifNull({conv}, '[]'), '[]')"  # (the array's text)
    else:
        # (ifNull, not assumeNotNull: under a NULL may lie the text that did not fit)
        default = default_of(strip_wrappers(col.type)[0])
        value = f"if({present}, ifNull({conv}, {default}), {default})"
    return f"CAST({value}, {quote_str(col.type)})"


def checks_text(col: Column, text: str) -> bool:
    """Whether a column's text can fail its conversion (not a String, nor a type without a check)."""
    conv = conversion(text, col.type)
    return conv is not None and conv != text


def bad_conditions(columns: list[Column], texts: list[str], present: list[str]) -> list[str]:
    """multiIf arms: a column's text (`texts`, where `present`) does not convert into its type."""
    parts = []
    for i, col in enumerate(columns):
        if checks_text(col, texts[i]):
            parts += bad_arm(col, texts[i], present[i], quote_str(col.name))
    return parts


def bad_arm(col: Column, text: str, present: str, name_sql: str, conv: str | None = None) -> list[str]:
    """The multiIf arm (condition, reason) of a checked column whose text (`text`, where `present`) does not
    convert (`conv`: SQL of the conversion, if at hand), the column named by `name_sql`."""
    return [f"{present} AND ({conv or conversion(text, col.type)}) IS NULL", bad_reason(col, text, name_sql)]


def bad_reason(col: Column, text: str, name_sql: str) -> str:
    """`bad_arm`'s reason: `column <name>: <text> does not fit <type>`."""
    inner = strip_wrappers(col.type)[0]
    shown = f"if(empty({text}), '\"\"', substring({text}, 1, 200))"
    return unfit(col.name, shown, inner) if name_sql == quote_str(col.name) else unfit_named(name_sql, shown, inner)


def refused_conditions(col: Column, text: str, present: str) -> list[str]:
    """multiIf arms: a value of a PLAIN_SCALARS column the JSON parser refused (`text`, where
    `present`), named. A cast takes `yes` for a Bool, the reader not: only true/false/0/1 fit."""
    return refused_arm(col, text, present, quote_str(col.name))


def refused_arm(col: Column, text: str, present: str, name_sql: str) -> list[str]:
    """`refused_conditions`' arm (condition, reason), the column named by `name_sql`; [] for other types."""
    inner = strip_wrappers(col.type)[0]
    if inner.startswith("Array("):
        return _refused_elements_arm(col, inner, text, present, name_sql)
    if inner not in PLAIN_SCALARS:
        return []
    bad = (
        f"lower({text}) NOT IN ('true', 'false', '0', '1')"
        if inner == "Bool"
        else f"isNull(accurateCastOrNull({text}, {quote_str(inner)}))"
    )
    shown = f"substring({text}, 1, 200)"
    reason = unfit(col.name, shown, inner) if name_sql == quote_str(col.name) else unfit_named(name_sql, shown, inner)
    return [f"{present} AND {bad}", reason]


def _refused_elements_arm(col: Column, inner: str, text: str, present: str, name_sql: str) -> list[str]:
    """`refused_arm` of a JSON array whose elements the reader refuses rather than changes
    (FixedString, Enum and PLAIN_SCALARS, read as they are): an element that does not convert."""
    element = strip_wrappers(inner[len("Array(") : -1])[0]
    if not (element.startswith(("FixedString(", "Enum")) or element in PLAIN_SCALARS):
        return []
    x = "__r"
    unquoted = f"if(startsWith({x}, {quote_str(chr(34))}), JSONExtractString({x}), {x})"
    conv = conversion(unquoted, element)
    if conv is None:
        return []
    bad = f"arrayExists({x} -> {x} != 'null' AND isNull({conv}), JSONExtractArrayRaw({text}))"
    shown = f"substring({text}, 1, 200)"
    reason = unfit(col.name, shown, inner) if name_sql == quote_str(col.name) else unfit_named(name_sql, shown, inner)
    return [f"{present} AND {bad}", reason]


def range_reasons(columns: list[Column]) -> str:
    """SQL over a row the engine parsed with checked types as text (`read_type`): why its
    values do not fit their columns ('' when they do)."""
    reasons = []
    for c in columns:
        if read_as_text(c.type):
            ident = quote_ident(c.name)
            shown = f"if(empty({ident}), '\"\"', {ident})"
            reason = unfit(c.name, shown, strip_wrappers(c.type)[0])
            reasons.append(f"if(isNotNull({ident}) AND ({conversion(ident, c.type)}) IS NULL, {reason}, '')")
    return f"arrayStringConcat(arrayFilter(x -> x != '', [{', '.join(reasons)}]), '; ')" if reasons else "''"
