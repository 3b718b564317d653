"""`python -m chute.cli`."""

from chute.cli import entry

entry()
