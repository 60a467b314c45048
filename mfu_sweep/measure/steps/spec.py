"""What ``steps --model`` and ``--dtype`` may name, read and checked at the edge without torch.

The parent process of ``mfu-sweep steps`` stays torch-free (as the sweep's does): it parses the model here,
and the run processes build it (:mod:`mfu_sweep.measure.steps.models`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from mfu_sweep.gemm.llm_options import DEFAULT_SEQ, DEFAULT_TOKENS, parse_int
from mfu_sweep.gemm.shapes import ShapeError
from mfu_sweep.gemm.workloads import read_llm_spec

SOURCES = ("llm", "hf", "py")
HF_EXTRA = "pip install 'mfu-sweep[hf]' (transformers)"


class ModelSpecError(ValueError):
    """A ``--model`` value names no model this tool can build; the message says why, in one line."""


@dataclass(frozen=True)
class ModelSpec:
    """A ``--model`` value read: its source (``llm``, ``hf``, ``py``), what it names and its options."""

    text: str
    source: str
    target: str
    options: tuple[tuple[str, str], ...] = ()

    def option(self, name: str) -> str | None:
        return dict(self.options).get(name)


def _split_options(parts: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Trailing ``key=value`` parts (options) apart from the rest (a path or id may itself hold a colon)."""
    opts: list[tuple[str, str]] = []
    while parts and "=" in parts[-1] and "/" not in parts[-1]:
        key, _, value = parts.pop().partition("=")
        opts.insert(0, (key.strip().lower(), value.strip()))
    return parts, opts


def parse_model_spec(text: str) -> ModelSpec:
    """Read and check ``llm:...``, ``hf:CONFIG[:tokens=N][:seq=N]`` or ``py:FILE.py:FUNCTION`` at the edge.

    Torch-free apart from this module's import; transformers is only looked for. A :class:`ModelSpecError`
    names the bad part: an unknown source or model, an unknown option, a missing file or extra.
    """
    source, sep, rest = text.strip().partition(":")
    source = source.lower()
    if not sep or source not in SOURCES:
        raise ModelSpecError(f"--model {text!r}: start with one of {', '.join(s + ':' for s in SOURCES)} "
                             "(llm:llama-3-8b:layers=2, hf:path/to/config.json, py:model.py:make)")
    if source == "llm":
        return _llm_spec(text)
    if source == "hf":
        return _hf_spec(text, rest)
    return _py_spec(text, rest)


def _llm_spec(text: str) -> ModelSpec:
    try:
        read = read_llm_spec(text)
    except ShapeError as exc:
        raise ModelSpecError(f"--model {exc}") from None
    opts, model = read.opts, read.model
    refuse = {"tp": opts.tp != 1, "ep": opts.ep != 1, "lm_head": not opts.lm_head, "attn": opts.attn == "0"}
    for name, bad in refuse.items():
        if bad:
            raise ModelSpecError(f"--model {text!r}: option {name}={getattr(opts, name) if name != 'lm_head' else 0} "
                                 "describes GEMMs of a sharded or partial step; steps builds one device's whole "
                                 "model (drop the option)")
    if model.is_moe:
        raise ModelSpecError(f"--model {text!r}: {model.id} is a mixture-of-experts model; steps builds dense "
                             "decoders only (use hf: with its config, or py: with your own code)")
    return ModelSpec(text.strip(), "llm", read.family)


def _hf_spec(text: str, rest: str) -> ModelSpec:
    parts, opts = _split_options(rest.split(":"))
    target = ":".join(parts).strip()
    if not target:
        raise ModelSpecError(f"--model {text!r}: name a config, hf:path/to/config.json or hf:org/model")
    for key, value in opts:
        if key not in ("tokens", "seq"):
            raise ModelSpecError(f"--model {text!r}: unknown option {key!r} (hf: takes tokens and seq)")
        try:
            parse_int(key, value, text)
        except ShapeError as exc:
            raise ModelSpecError(f"--model {exc}") from None
    if importlib.util.find_spec("transformers") is None:
        raise ModelSpecError(f"--model {text!r}: hf: models need transformers: {HF_EXTRA}")
    looks_like_path = target.endswith(".json") or target.startswith((".", "/", "~")) or os.path.exists(target)
    if looks_like_path and not os.path.exists(os.path.expanduser(target)):
        raise ModelSpecError(f"--model {text!r}: no such file or folder {target!r}")
    spec = ModelSpec(text.strip(), "hf", target, tuple(opts))
    tokens, seq = hf_tokens(spec)
    if tokens % seq:
        raise ModelSpecError(f"--model {text!r}: tokens={tokens} is not a multiple of seq={seq}")
    return spec


def _py_spec(text: str, rest: str) -> ModelSpec:
    path, sep, function = rest.rpartition(":")
    if not sep or not path or not function.isidentifier():
        raise ModelSpecError(f"--model {text!r}: use py:FILE.py:FUNCTION (FUNCTION() returns (model, batch))")
    if not path.endswith(".py"):
        raise ModelSpecError(f"--model {text!r}: {path!r} is not a .py file")
    if not os.path.isfile(path):
        raise ModelSpecError(f"--model {text!r}: no such file {path!r}")
    return ModelSpec(text.strip(), "py", str(Path(path).resolve()) + ":" + function)


def hf_tokens(spec: ModelSpec) -> tuple[int, int]:
    """Tokens per step and sequence length of an ``hf:`` spec (the ``llm:`` defaults where not given)."""
    tokens = int(spec.option("tokens") or DEFAULT_TOKENS)
    seq = int(spec.option("seq") or min(tokens, DEFAULT_SEQ))
    return tokens, seq


STEP_DTYPES = ("fp32", "tf32", "bf16", "fp16")


def check_dtype(name: str) -> None:
    """steps runs plain floating-point dtypes: a model's weights and activations in that type."""
    if name not in STEP_DTYPES:
        raise ModelSpecError(f"--dtype {name}: steps runs {', '.join(STEP_DTYPES)} (a model's weights and "
                             "activations in that type)")
