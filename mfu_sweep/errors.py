"""Error types shared by every stage, free of torch and Click so analysis stays light.

Validation errors of the library are ``ValueError`` subclasses (``ShapeError``,
``SpecError``, ``ResultError``, ``CompareError`` ...) whose messages name the
field and the bad value; :class:`BackendError` says why a device is unusable.
The CLI (``mfu_sweep.cli.common.domain_errors``) turns both into one-line
errors with exit code 1.
"""

from __future__ import annotations


class BackendError(RuntimeError):
    """The requested device is absent or unusable; the message says why."""
