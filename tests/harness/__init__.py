"""Test harnesses that start several real servers at once (see cluster.py)."""
