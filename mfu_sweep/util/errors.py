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


DEVICE_HINT = "try --device cpu, or see what this machine has with `mfu-sweep specs --detect`"


def with_hint(message: str) -> str:
    """A device error's message without a leading class name, with :data:`DEVICE_HINT` where it has no fix."""
    for prefix in ("BackendError: ", "RuntimeError: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if "--device" in message or "try " in message:
        return message
    return f"{message}; {DEVICE_HINT}"
