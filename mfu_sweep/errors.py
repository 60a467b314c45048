"""Error types shared by the library and the CLI, free of torch so analysis stays light.

Validation errors of the library are ``ValueError`` subclasses (``ShapeError``,
``SpecError``, ``ResultError``, ``CompareError`` ...) whose messages name the
field and the bad value; :func:`one_line_errors` turns them, and
:class:`BackendError`, into one-line Click errors with exit code 1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click


class BackendError(RuntimeError):
    """The requested device is absent or unusable; the message says why."""


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for Click commands: domain errors become ``Error: <message>``, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ValueError, BackendError) as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper
