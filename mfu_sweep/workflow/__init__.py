"""Workflows that alternate measuring and analysing (the stage above ``measure/`` and ``analysis/``).

They take the measuring as a callable, so they need no device and nothing below imports them.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and ``analysis/`` (the measuring is handed
in as a callable); never ``measure/``, ``present/``, ``cli/``, torch, matplotlib or Click.
"""
