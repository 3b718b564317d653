"""The value checks of a load, one module per type family, used by every pass.

The engine's parsers wrap integers, clamp dates and roll clocks over instead of refusing
a value; these modules give the SQL that reads a column so that such a value is refused
(or its row rejected with a reason), never changed. The fast path, the careful and tolerant
passes, typed files and server-parse verification all ask here (docs/internals/values.md).
"""
