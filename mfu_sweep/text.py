"""Wording shared by messages at every stage (ground: no torch, no Click)."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``counted(1, "core")`` is ``"1 core"``, 2 gives ``"2 cores"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
