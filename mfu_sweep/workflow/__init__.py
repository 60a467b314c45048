"""Workflows that alternate measuring and analysing (the stage above ``measure/`` and ``analysis/``).

They take the measuring as a callable, so they need no device and nothing below imports them.
"""
