"""`python -m chute`: the chute command."""

from chute.cli import entry

entry()
