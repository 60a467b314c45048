"""The models ``mfu-sweep steps`` measures, built with random weights and nothing downloaded.

``llm:NAME[:opts]``
    A decoder from the shipped config (``data/models.toml``) and the family's options
    (:mod:`mfu_sweep.gemm.llm_options`): token embeddings; per layer RMSNorm, attention (q, k, v as one fused
    linear or three, ``qkv=``; rotary embeddings; ``F.scaled_dot_product_attention``, causal, grouped-query
    where ``kv_heads < heads``), the output projection, RMSNorm and a SwiGLU MLP (gate and up as two linears
    or one, ``gate_up=``); a final RMSNorm and the LM head (the embedding's weight where the config ties
    them). No linear has a bias. A batch is ``tokens / seq`` sequences of ``seq`` random token ids; training
    takes the cross-entropy against random labels. The GEMMs its autograd runs are those of the family
    ``...:attn=sdpa`` (``tests/test_workloads.py`` records them).
``hf:CONFIG[:tokens=N][:seq=N]``
    ``AutoModelForCausalLM.from_config`` of a transformers config: a ``config.json`` file (or a folder
    holding one), or a model id whose config is in the local Hugging Face cache (read with
    ``HF_HUB_OFFLINE=1``: never a download). Needs the ``hf`` extra (transformers). Its batch is
    ``input_ids`` (and ``labels``, the same ids, for training: the model shifts them).
``py:FILE.py:FUNCTION``
    ``FUNCTION()`` returns ``(model, batch)``; the step runs ``model(*batch)``, or ``model(**batch)`` for a
    dict (a lone tensor is one argument). The model and the batch's tensors move to the device, the
    floating-point ones to the step's dtype.

Training's loss is ``out.loss`` where the output has one, else the sum of the output (of every tensor in a
tuple, list or dict output), as :func:`loss_of` says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from mfu_sweep.gemm.llm_options import canonical_llm
from mfu_sweep.gemm.models import ModelConfig
from mfu_sweep.gemm.workloads import read_llm_spec
from mfu_sweep.measure.steps.spec import HF_EXTRA, ModelSpec, hf_tokens


class ModelBuildError(RuntimeError):
    """The model cannot be built: the user's own code (a ``py:`` FUNCTION) raised or returned something else
    than ``(model, batch)``, or a config cannot be read; the message says why, in one line."""


# --------------------------------------------------------------------------- the llm: decoder


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


_GQA = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, qkv: str) -> None:
        super().__init__()
        self.heads, self.kv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        hidden = cfg.hidden_size
        if qkv == "fused":
            self.qkv = nn.Linear(hidden, (self.heads + 2 * self.kv) * self.hd, bias=False)
        else:
            self.q = nn.Linear(hidden, self.heads * self.hd, bias=False)
            self.k = nn.Linear(hidden, self.kv * self.hd, bias=False)
            self.v = nn.Linear(hidden, self.kv * self.hd, bias=False)
        self.o = nn.Linear(self.heads * self.hd, hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        if hasattr(self, "qkv"):
            q, k, v = self.qkv(x).split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = _rotate(q.view(b, s, self.heads, self.hd).transpose(1, 2), cos, sin)
        k = _rotate(k.view(b, s, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        if self.kv == self.heads:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif _GQA:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:  # torch < 2.5: the KV heads repeated for their groups
            group = self.heads // self.kv
            out = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                                 is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, self.heads * self.hd))


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, ffn: int, gate_up: str) -> None:
        super().__init__()
        self.ffn = ffn
        if gate_up == "fused":
            self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        else:
            self.gate = nn.Linear(hidden, ffn, bias=False)
            self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "gate_up"):
            gate, up = self.gate_up(x).split([self.ffn, self.ffn], dim=-1)
        else:
            gate, up = self.gate(x), self.up(x)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, qkv: str, gate_up: str) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden_size)
        self.attn = Attention(cfg, qkv)
        self.mlp_norm = RMSNorm(cfg.hidden_size)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, gate_up)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """The ``llm:`` decoder; ``forward(input_ids)`` gives logits, ``forward(input_ids, labels)`` the loss."""

    def __init__(self, cfg: ModelConfig, seq: int, qkv: str = "fused", gate_up: str = "split") -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg, qkv, gate_up) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed.weight
        inv = 1.0 / (500000.0 ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(input_ids)
        s = input_ids.shape[1]
        cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if labels is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


# --------------------------------------------------------------------------- building


@dataclass
class Workload:
    """A built model, its batch and where they came from."""

    model: nn.Module
    batch: Any
    source: str
    gemm_family: str | None = None

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def _ids(vocab: int, sequences: int, seq: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (sequences, seq), generator=gen)


def build_llm(spec: ModelSpec, kind: str) -> Workload:
    """The ``llm:`` decoder and its batch, on the CPU in fp32 (:func:`place` moves them)."""
    read = read_llm_spec(spec.text)
    opts = read.opts
    model = Decoder(read.model, opts.seq_len, opts.qkv, opts.gate_up)
    ids = _ids(read.model.vocab_size, opts.sequences, opts.seq_len, 0)
    batch = {"input_ids": ids}
    if kind == "train":
        batch["labels"] = _ids(read.model.vocab_size, opts.sequences, opts.seq_len, 1)
    family = canonical_llm(read.shipped, replace(opts, attn="sdpa"))  # the canonical name a sweep's records carry
    return Workload(model, batch, "llm", family)


def hf_config(target: str) -> Any:
    """The transformers config of a file, a folder or a cached model id (offline: never a download)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers import AutoConfig
    except ImportError:
        raise ModelBuildError(f"hf: models need transformers: {HF_EXTRA}") from None
    path = Path(os.path.expanduser(target))
    if path.is_file():
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "model_type" not in data:
            raise ModelBuildError(f"{target}: not a transformers config.json (no model_type field)")
        kind = data.pop("model_type")
        return AutoConfig.for_model(kind, **data)
    try:
        return AutoConfig.from_pretrained(str(path) if path.is_dir() else target, local_files_only=True)
    except OSError as exc:
        raise ModelBuildError(f"{target}: no config in the local Hugging Face cache or folder (nothing is "
                              f"downloaded): {str(exc).splitlines()[0]}") from None


def build_hf(spec: ModelSpec, kind: str) -> Workload:
    from transformers import AutoModelForCausalLM

    config = hf_config(spec.target)
    model = AutoModelForCausalLM.from_config(config)
    tokens, seq = hf_tokens(spec)
    ids = _ids(int(config.vocab_size), tokens // seq, seq, 0)
    batch = {"input_ids": ids, **({"labels": ids} if kind == "train" else {})}
    return Workload(model, batch, "hf", None)


def build_py(spec: ModelSpec) -> Workload:
    path, _, function = spec.target.rpartition(":")
    name = f"mfu_sweep_user_{abs(hash(path))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ModelBuildError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
        fn = getattr(module, function, None)
        if not callable(fn):
            raise ModelBuildError(f"{path} has no function {function!r}")
        got = fn()
    except ModelBuildError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: its own error, in one line
        raise ModelBuildError(f"{Path(path).name}:{function}() raised {type(exc).__name__}: "
                              f"{first_line(exc)}") from None
    if not (isinstance(got, tuple | list) and len(got) == 2 and isinstance(got[0], nn.Module)):
        raise ModelBuildError(f"{Path(path).name}:{function}() returned {type(got).__name__}; it must return "
                              "(model, batch) with model a torch.nn.Module")
    return Workload(got[0], got[1], "py", None)


def build(spec: ModelSpec, kind: str) -> Workload:
    """The workload of ``spec`` on the CPU (seeded: every run builds the same weights)."""
    torch.manual_seed(0)
    if spec.source == "llm":
        return build_llm(spec, kind)
    if spec.source == "hf":
        return build_hf(spec, kind)
    return build_py(spec)


def _move(value: Any, device: torch.device, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
    if isinstance(value, Mapping):
        return {k: _move(v, device, dtype) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return type(value)(_move(v, device, dtype) for v in value)
    return value


def place(work: Workload, device: torch.device, dtype: torch.dtype) -> Workload:
    """The model and the batch's tensors on ``device``, floating-point ones in ``dtype``."""
    work.model.to(device=device, dtype=dtype)
    work.batch = _move(work.batch, device, dtype)
    return work


def call(model: Callable[..., Any], batch: Any) -> Any:
    """``model(**batch)`` for a dict, ``model(*batch)`` for a tuple or list, else ``model(batch)``."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, tuple | list):
        return model(*batch)
    return model(batch)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


def loss_of(out: Any) -> torch.Tensor:
    """Training's loss: ``out.loss`` where present, else the sum of every floating-point tensor in ``out``."""
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    parts = [t.float().sum() for t in _tensors(out) if t.is_floating_point()]
    if not parts:
        raise ModelBuildError(f"the model's output ({type(out).__name__}) has no loss and no floating-point "
                              "tensor to sum for the backward pass")
    return parts[0] if len(parts) == 1 else torch.stack(parts).sum()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
