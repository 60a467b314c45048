"""The ``key=value`` options of an ``llm:`` family and of ``steps --model llm:...``: parsing, checking, names.

Two kinds of option:

- how one rank's step is laid out (``tokens``, ``seq``, ``tp``, ``ep``, ``lm_head``, ``attn``, ``qkv``,
  ``gate_up``, ``moe``, ``routing``, ``skew``, ``seed``);
- the model's sizes, replacing the shipped config's (``hidden``, ``ffn``, ``layers``, ``heads``, ``kv_heads``,
  ``head_dim``, ``vocab``): a custom model is described by its nearest shipped config plus these
  (:func:`mfu_sweep.gemm.models.with_sizes` checks that the sizes make a model).

``attn`` is ``1`` (attention's score and value products as batched GEMMs, as an unfused kernel runs them),
``0`` (left out) or ``sdpa``: the model runs ``F.scaled_dot_product_attention``, a fused kernel whose products
are no GEMM a sweep measures, so none is counted (what ``mfu-sweep steps`` builds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from mfu_sweep.gemm.models import SIZE_OPTIONS, ModelConfig, with_sizes
from mfu_sweep.gemm.routing import DEFAULT_SKEW, ROUTINGS
from mfu_sweep.gemm.shapes import ShapeError

DEFAULT_TOKENS = 4096
DEFAULT_SEQ = 4096
ATTN_CHOICES = ("1", "0", "sdpa")


@dataclass(frozen=True)
class LlmOptions:
    """How one training step of one rank is laid out, and the sizes that replace the config's (None: keep)."""

    tokens: int = DEFAULT_TOKENS
    seq: int | None = None
    tp: int = 1
    ep: int = 1
    lm_head: bool = True
    attn: str = "1"
    qkv: str = "fused"
    gate_up: str = "split"
    moe: str = "split"
    routing: str = "balanced"
    skew: float = DEFAULT_SKEW
    seed: int = 0
    hidden: int | None = None
    ffn: int | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab: int | None = None

    @property
    def seq_len(self) -> int:
        return self.seq if self.seq is not None else min(self.tokens, DEFAULT_SEQ)

    @property
    def sequences(self) -> int:
        """Sequences per step: ``tokens / seq``."""
        return self.tokens // self.seq_len

    def sizes(self) -> dict[str, int]:
        """The size options given, by name (:data:`mfu_sweep.gemm.models.SIZE_OPTIONS`)."""
        return {name: getattr(self, name) for name in SIZE_OPTIONS if getattr(self, name) is not None}


_CHOICES = {"qkv": ("fused", "split"), "gate_up": ("split", "fused"), "moe": ("split", "grouped"),
            "routing": ROUTINGS, "attn": ATTN_CHOICES}


def parse_int(key: str, text: str, family: str) -> int:
    """A positive integer option value, or a :class:`ShapeError` naming the option and the value."""
    if not text.isdigit() or int(text) < 1:
        raise ShapeError(f"family {family!r}: option {key}={text!r} must be a positive integer")
    return int(text)


def _parse_flag(key: str, text: str, family: str) -> bool:
    if text not in ("0", "1"):
        raise ShapeError(f"family {family!r}: option {key}={text!r} must be 0 or 1")
    return text == "1"


def _parse_skew(text: str, family: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= 10):
        raise ShapeError(f"family {family!r}: option skew={text!r} must be a number from 0 to 10 (Zipf exponent)")
    return value


def _parse_value(key: str, value: str, family: str) -> Any:
    if key == "lm_head":
        return _parse_flag(key, value, family)
    if key == "skew":
        return _parse_skew(value, family)
    if key == "seed":
        if not value.isdigit():
            raise ShapeError(f"family {family!r}: option seed={value!r} must be a non-negative integer")
        return int(value)
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise ShapeError(f"family {family!r}: option {key}={value!r} must be one of {', '.join(_CHOICES[key])}")
        return value
    return parse_int(key, value, family)


def parse_llm_options(parts: Sequence[str], family: str) -> LlmOptions:
    """Parse ``key=value`` parts of an ``llm:`` family string (sizes are checked against a model by
    :func:`resized`)."""
    kwargs: dict[str, Any] = {}
    known = [f.name for f in fields(LlmOptions)]
    for part in parts:
        key, sep, value = part.partition("=")
        key, value = key.strip().lower().replace("-", "_"), value.strip().lower()
        if not sep or key not in known:
            raise ShapeError(f"family {family!r}: unknown option {part!r} (known: {', '.join(known)}; as key=value)")
        if key in kwargs:
            raise ShapeError(f"family {family!r}: option {key!r} given twice")
        kwargs[key] = _parse_value(key, value, family)
    opts = LlmOptions(**kwargs)
    if opts.tokens % opts.seq_len:
        raise ShapeError(f"family {family!r}: tokens={opts.tokens} is not a multiple of seq={opts.seq_len}")
    return opts


def resized(model: ModelConfig, opts: LlmOptions, family: str) -> ModelConfig:
    """``model`` with the size options of ``opts`` applied; a :class:`ShapeError` naming the family and the
    option when they do not make a model."""
    try:
        return with_sizes(model, **opts.sizes())
    except ShapeError as exc:
        raise ShapeError(f"family {family!r}: {exc}") from None


def canonical_llm(model: ModelConfig, opts: LlmOptions) -> str:
    """``llm:<id>`` plus the options that differ from their defaults, in a fixed order (``model`` is the shipped
    config: a size option equal to its value is left out)."""
    default = LlmOptions()
    parts = [f"llm:{model.id}"]
    for f in fields(LlmOptions):
        value = getattr(opts, f.name)
        if f.name == "seq":
            if value is None or value == min(opts.tokens, DEFAULT_SEQ):
                continue
        elif value == getattr(default, f.name):
            continue
        elif f.name in SIZE_OPTIONS and value == getattr(model, SIZE_OPTIONS[f.name]):
            continue
        text = int(value) if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else value
        parts.append(f"{f.name}={text}")
    return ":".join(parts)
