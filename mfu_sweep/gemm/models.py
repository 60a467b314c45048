"""Transformer configs that fix a model's GEMM shapes: the shipped table (data/models.toml, each entry cited) and its
validation.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields, replace
from functools import cache
from importlib import resources
from typing import Any

from mfu_sweep.gemm.shapes import ShapeError


@dataclass(frozen=True)
class ModelConfig:
    """The fields of a published config.json that fix a transformer's GEMM shapes."""

    id: str
    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    num_local_experts: int
    experts_per_token: int
    sliding_window: int
    sliding_layers: str
    source_title: str
    source_url: str
    source_read: str = ""
    corroborated_by: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    notes: str = ""

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 0

    def is_sliding(self, layer: int) -> bool:
        """Whether ``layer`` (0-based) uses sliding-window attention."""
        if self.sliding_window <= 0 or self.sliding_layers == "none":
            return False
        if self.sliding_layers == "all":
            return True
        return layer % 2 == (0 if self.sliding_layers == "even" else 1)


_INT_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "vocab_size", "num_local_experts", "experts_per_token",
               "sliding_window")


_SLIDING = ("none", "even", "odd", "all")


def _model_from_toml(entry: Mapping[str, Any], where: str) -> ModelConfig:
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ShapeError(f"{where}: unknown field {unknown[0]!r}")
    required = [f.name for f in fields(ModelConfig) if f.default is MISSING]
    missing = [name for name in required if name not in entry]
    if missing:
        raise ShapeError(f"{where}: missing field {missing[0]!r}")
    for name in _INT_FIELDS:
        value = entry[name]
        minimum = 0 if name in ("num_local_experts", "experts_per_token", "sliding_window") else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ShapeError(f"{where}: {name}={value!r} must be an integer >= {minimum}")
    if entry["sliding_layers"] not in _SLIDING:
        raise ShapeError(f"{where}: sliding_layers={entry['sliding_layers']!r} must be one of {', '.join(_SLIDING)}")
    if bool(entry["num_local_experts"]) != bool(entry["experts_per_token"]):
        raise ShapeError(f"{where}: num_local_experts and experts_per_token must both be 0 or both positive")
    data = dict(entry)
    for name in ("corroborated_by", "aliases"):
        data[name] = tuple(data.get(name, ()))
    return ModelConfig(**data)


@cache
def load_models() -> dict[str, ModelConfig]:
    """The shipped model table (``mfu_sweep/data/models.toml``), keyed by id."""
    text = resources.files("mfu_sweep").joinpath("data/models.toml").read_text()
    table = tomllib.loads(text)
    models = {}
    for i, entry in enumerate(table.get("model", [])):
        model = _model_from_toml(entry, f"models.toml model[{i}]")
        models[model.id] = model
    return models


def find_model(name: str) -> ModelConfig:
    """Look a model up by id or alias (case-insensitive); unknown names list the known ones."""
    key = name.strip().lower()
    for model in load_models().values():
        if key == model.id or key in model.aliases:
            return model
    raise ShapeError(f"unknown model {name!r} (known: {', '.join(sorted(load_models()))})")


# Size options of an ``llm:`` family (``mfu_sweep.gemm.llm_options``) and the config field each replaces.
SIZE_OPTIONS = {"hidden": "hidden_size", "ffn": "intermediate_size", "layers": "num_hidden_layers",
                "heads": "num_attention_heads", "kv_heads": "num_key_value_heads", "head_dim": "head_dim",
                "vocab": "vocab_size"}


def with_sizes(model: ModelConfig, **sizes: int) -> ModelConfig:
    """``model`` with some sizes replaced (keys of :data:`SIZE_OPTIONS`), checked to make a transformer.

    ``head_dim`` follows ``hidden / heads`` when the config's does (Llama) and either of them changes;
    a config whose head_dim is its own (Qwen3: 128 whatever the hidden size) keeps it unless given.
    ``kv_heads`` must divide ``heads`` (grouped-query attention). A :class:`ShapeError` names the option.
    """
    unknown = sorted(set(sizes) - set(SIZE_OPTIONS))
    if unknown:
        raise ShapeError(f"unknown size option {unknown[0]!r} (known: {', '.join(SIZE_OPTIONS)})")
    if not sizes:
        return model
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ShapeError(f"option {name}={value!r} must be a positive integer")
    data = {field: sizes.get(name, getattr(model, field)) for name, field in SIZE_OPTIONS.items()}
    follows = model.head_dim * model.num_attention_heads == model.hidden_size
    if "head_dim" not in sizes and follows and ("hidden" in sizes or "heads" in sizes):
        if data["hidden_size"] % data["num_attention_heads"]:
            raise ShapeError(f"option hidden={data['hidden_size']} is not divisible by heads="
                             f"{data['num_attention_heads']} (head_dim = hidden / heads in {model.id}); give "
                             "head_dim too, or a hidden size divisible by heads")
        data["head_dim"] = data["hidden_size"] // data["num_attention_heads"]
    if data["num_attention_heads"] % data["num_key_value_heads"]:
        raise ShapeError(f"option kv_heads={data['num_key_value_heads']} does not divide heads="
                         f"{data['num_attention_heads']} (each KV head serves a whole group of query heads)")
    if data["head_dim"] % 2:
        raise ShapeError(f"option head_dim={data['head_dim']} must be even (rotary embeddings rotate pairs)")
    return replace(model, **data)
