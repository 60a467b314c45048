"""Plumbing shared by every layer: bounded input reading, JSON bytes, output paths, atomic writes, a report
folder's manifest, the one-writer file lock, safe names, progress on stderr, malloc settings, wording,
error types, median/IQR helpers.

Decides nothing about GEMMs or results. May import: itself only (the standard library, numpy, orjson);
never ``gemm/``, ``specs/``, ``records/``, a stage, torch, matplotlib or Click.
"""
