"""Measured table layouts: types, codecs and ORDER BY chosen by trying them.

The engine loads a sample of the files once into a scratch table; everything
after that is SQL on the sample. Value ranges and round trips choose the types
(a type is proposed only if every sampled value survives it exactly), candidate
tables holding every codec variant of every column choose the codecs, and the
sample written into each candidate ORDER BY chooses the layout by bytes on
disk. Python loops over columns and candidates, never over rows. Scratch tables
are named `_chute_design_*` and are dropped whatever happens.
"""

from __future__ import annotations

from chute.design.layout import create_table_ddl
from chute.design.model import ColumnChoice, LayoutTrial, Proposal
from chute.design.proposal import design_sources, propose
from chute.design.render import load_ddl_file, render_text
from chute.design.types import narrowest_int

__all__ = [
    "ColumnChoice",
    "LayoutTrial",
    "Proposal",
    "create_table_ddl",
    "design_sources",
    "load_ddl_file",
    "narrowest_int",
    "propose",
    "render_text",
]
