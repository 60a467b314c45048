"""Real-workload shape families: transformer training steps, DeepBench, m x n x k grids.

One entry point, :func:`resolve_family`, turns a family string into the GEMMs
it stands for, each with a role, a pass and a count per step:

``llm:<model>[:key=value]...``
    The GEMMs of one training step (forward, dgrad, wgrad) of one rank for a
    published model config (``data/models.toml``, every number cited).
    Options: ``tokens`` per step and rank (sequences x sequence length,
    default 4096), ``seq`` (sequence length, default ``min(tokens, 4096)``),
    ``tp`` (Megatron-style tensor parallelism), ``ep`` (expert parallelism),
    ``lm_head=0|1``, ``attn=0|1`` (attention score/value GEMMs),
    ``qkv=fused|split`` and ``gate_up=split|fused``; for MoE models
    ``moe=split|grouped`` (one GEMM per expert, or the experts of a layer as
    one grouped GEMM, ``torch._grouped_mm``), ``routing=balanced|skewed``,
    ``skew`` (Zipf exponent, default 1) and ``seed`` (of the skewed draw),
    see :mod:`mfu_sweep.gemm.routing`. Sizes replace the config's: ``hidden``,
    ``ffn``, ``layers``, ``heads``, ``kv_heads``, ``head_dim``, ``vocab``
    (:mod:`mfu_sweep.gemm.llm_options`); ``attn=sdpa`` counts no attention GEMMs
    (a fused SDPA kernel, as ``mfu-sweep steps`` builds the model).
``deepbench:train|inference-server|inference-device|all``
    Baidu DeepBench's GEMM list (``data/deepbench.csv``, transcribed with citation).
``grid:M:N:K[:batch=B]``
    Every combination of comma-separated values; ``lo-hi`` means the powers of
    two from ``lo`` doubling up to ``hi``, e.g. ``grid:256-8192:256-8192:4096``.

Every GEMM is the product PyTorch's autograd runs, operand layout included
(``tests/test_workloads.py`` records the ``aten`` calls of ``F.linear`` and of
``q @ k.transpose`` / ``p @ v`` and their backward, and compares). For a linear
layer ``y = F.linear(x, W)`` with ``x`` (tokens x d_in) and ``W`` stored
(d_out x d_in): forward ``x @ W.t()`` m=tokens, n=d_out, k=d_in, layout ``nt``;
dgrad ``dy @ W`` m=tokens, n=d_in, k=d_out, ``nn``; wgrad ``dy.t() @ x``
m=d_out, n=d_in, k=tokens, ``tn``. For the attention products ``S = Q K^T``
(``nt``) and ``O = P V`` (``nn``), batched over sequences x heads, ``dgrad``
is the gradient of the first operand (dQ = dS K ``nn``, dP = dO V^T ``nt``)
and ``wgrad`` that of the second (d(K^T) = Q^T dS, hd x kv x q, ``tn``;
dV = P^T dO ``tn``). Attention GEMMs are dense: a causal kernel skips about half
of the score/value FLOPs of full-attention layers. Sliding-window layers
(gpt-oss) are tiled as blocks of ``window`` queries against ``2*window`` keys,
about twice the FLOPs of the exact band, as a block-sparse kernel computes them.
MoE expert GEMMs run at the tokens per expert of a routing model
(:mod:`mfu_sweep.gemm.routing`; balanced by default: ``tokens*ep*top_k/experts``
rounded half up), with the expert width sharded by ``tp``; the router is
replicated. With ``moe=grouped`` the experts of a layer are one grouped GEMM per
role and pass (``Shape.groups``): forward and dgrad grouped along m (tokens),
wgrad along k (each expert's weight gradient from its own tokens), as
``torch._grouped_mm``'s autograd runs them; FLOPs are counted from the real
token counts. DeepBench's rows keep their M, N, K and transposes as published
(cuBLAS's column-major convention); the sweep applies the two letters to
row-major operands.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from mfu_sweep.gemm.llm_options import LlmOptions, canonical_llm, parse_int, parse_llm_options, resized
from mfu_sweep.gemm.models import ModelConfig, find_model, load_models
from mfu_sweep.gemm.routing import local_expert_tokens
from mfu_sweep.gemm.shapes import Shape, ShapeError, format_groups, grid_family, unique_in_order

NO_PASS = "n/a"
DEEPBENCH_SETS = ("train", "inference-server", "inference-device")
KINDS = ("llm", "deepbench", "grid")


@dataclass(frozen=True)
class WorkloadGemm:
    """One GEMM of a workload: its shape, what it is, and how often it runs per step.

    Attributes
    ----------
    shape:
        The product, ``batch`` x (m x k) @ (k x n).
    family:
        Canonical family string, e.g. ``"llm:qwen3-32b:tokens=8192"``.
    role:
        What the GEMM computes (``qkv``, ``attn-out``, ``mlp-down``, ``lm-head`` ...).
    pass_:
        ``fwd``, ``dgrad`` or ``wgrad``; ``n/a`` for lists without passes.
    count:
        Calls per step (for ``llm:`` families: per training step of one rank).

    The operand layout is ``shape.layout`` (:attr:`layout`): what PyTorch runs for
    ``llm:`` families, the source's transposes for DeepBench, ``nn`` for grids.
    """

    shape: Shape
    family: str
    role: str
    pass_: str
    count: int = 1

    @property
    def layout(self) -> str:
        """The operand layout the GEMM runs in (``nn``, ``nt``, ``tn``, ``tt``)."""
        return self.shape.layout

    @property
    def flops(self) -> float:
        """FLOPs of all ``count`` calls."""
        return self.count * self.shape.flops

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape.to_json(), "family": self.family, "role": self.role, "pass": self.pass_,
                "count": self.count, "layout": self.layout, "groups": format_groups(self.shape) if self.shape.groups
                else None}


# ---------------------------------------------------------------------------
# llm: GEMMs


class _Collector:
    """Accumulates GEMMs, merging identical (shape, role, pass) entries by summing counts."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.items: dict[tuple[Shape, str, str], int] = {}

    def add(self, shape: Shape, role: str, pass_: str, count: int) -> None:
        if count > 0:
            key = (shape, role, pass_)
            self.items[key] = self.items.get(key, 0) + count

    def linear(self, role: str, d_in: int, d_out: int, tokens: int, count: int) -> None:
        """Forward, dgrad and wgrad of ``F.linear(x, W)`` with x (tokens x d_in), W stored (d_out x d_in)."""
        self.add(Shape(1, tokens, d_out, d_in, "nt"), role, "fwd", count)      # x @ W.t()
        self.add(Shape(1, tokens, d_in, d_out, "nn"), role, "dgrad", count)    # dx = dy @ W
        self.add(Shape(1, d_out, d_in, tokens, "tn"), role, "wgrad", count)    # dW = dy.t() @ x

    def grouped_linear(self, role: str, d_in: int, d_out: int, groups: tuple[int, ...], count: int) -> None:
        """:meth:`linear` of every expert as one grouped GEMM per pass (``torch._grouped_mm`` and its autograd)."""
        tokens = sum(groups)
        if tokens:
            self.add(Shape(1, tokens, d_out, d_in, "nt", groups), role, "fwd", count)
            self.add(Shape(1, tokens, d_in, d_out, "nn", groups), role, "dgrad", count)
            self.add(Shape(1, d_out, d_in, tokens, "tn", groups, "k"), role, "wgrad", count)

    def attention(self, batch: int, q: int, kv: int, head_dim: int, count: int) -> None:
        """``S = Q K^T`` (q x kv) and ``O = P V`` (q x head_dim) and their four backward products."""
        self.add(Shape(batch, q, kv, head_dim, "nt"), "attn-score", "fwd", count)    # Q @ K^T
        self.add(Shape(batch, q, head_dim, kv, "nn"), "attn-score", "dgrad", count)  # dQ = dS @ K
        self.add(Shape(batch, head_dim, kv, q, "tn"), "attn-score", "wgrad", count)  # d(K^T) = Q^T @ dS
        self.add(Shape(batch, q, head_dim, kv, "nn"), "attn-value", "fwd", count)    # P @ V
        self.add(Shape(batch, q, kv, head_dim, "nt"), "attn-value", "dgrad", count)  # dP = dO @ V^T
        self.add(Shape(batch, kv, head_dim, q, "tn"), "attn-value", "wgrad", count)  # dV = P^T @ dO

    def result(self) -> list[WorkloadGemm]:
        return [WorkloadGemm(s, self.family, r, p, c) for (s, r, p), c in self.items.items()]


def _shard(value: int, degree: int, what: str, family: str) -> int:
    if value % degree:
        raise ShapeError(f"family {family!r}: {what}={value} is not divisible by the parallel degree {degree}")
    return value // degree


def _kv_heads_per_rank(model: ModelConfig, tp: int, family: str) -> int:
    """KV heads per rank; with tp above the KV head count each rank holds a replicated head."""
    kv = model.num_key_value_heads
    if kv % tp == 0:
        return kv // tp
    if tp % kv == 0:
        return 1
    raise ShapeError(f"family {family!r}: num_key_value_heads={kv} and tp={tp} do not divide one another")


def _attention_gemms(col: _Collector, model: ModelConfig, opts: LlmOptions, heads: int) -> None:
    seq, hd = opts.seq_len, model.head_dim
    batch = (opts.tokens // seq) * heads
    layers = model.num_hidden_layers
    window = model.sliding_window
    sliding = sum(model.is_sliding(i) for i in range(layers)) if 0 < window < seq else 0
    col.attention(batch, seq, seq, hd, layers - sliding)
    if sliding:
        # Banded attention as block GEMMs: each block of `window` queries against its own
        # and the previous key block (2*window keys), the way block-sparse kernels tile it.
        blocks = math.ceil(seq / window)
        col.attention(batch * blocks, window, 2 * window, hd, sliding)


def llm_gemms(model: ModelConfig, opts: LlmOptions, family: str | None = None) -> list[WorkloadGemm]:
    """The GEMMs of one training step of one rank of ``model`` under ``opts``."""
    family = family or canonical_llm(model, opts)
    if not model.is_moe and opts.moe == "grouped":  # no experts to group: refused, never ignored
        raise ShapeError(f"family {family!r}: moe=grouped groups a mixture-of-experts model's experts; {model.id} "
                         "is dense (no experts): drop moe=grouped")
    model = resized(model, opts, family)
    tp, tokens, layers = opts.tp, opts.tokens, model.num_hidden_layers
    hidden, hd = model.hidden_size, model.head_dim
    heads = _shard(model.num_attention_heads, tp, "num_attention_heads", family)
    kv = _kv_heads_per_rank(model, tp, family)
    col = _Collector(family)
    if opts.qkv == "fused":
        col.linear("qkv", hidden, (heads + 2 * kv) * hd, tokens, layers)
    else:
        col.linear("qkv", hidden, heads * hd, tokens, layers)
        col.linear("qkv", hidden, kv * hd, tokens, 2 * layers)
    if opts.attn == "1":  # attn=sdpa: a fused kernel, no GEMM a sweep measures
        _attention_gemms(col, model, opts, heads)
    col.linear("attn-out", heads * hd, hidden, tokens, layers)
    if model.is_moe:
        _moe_gemms(col, model, opts, family)
    else:
        ffn = _shard(model.intermediate_size, tp, "intermediate_size", family)
        _mlp(col, "mlp", hidden, ffn, tokens, layers, opts.gate_up)
    if opts.lm_head:
        col.linear("lm-head", hidden, math.ceil(model.vocab_size / tp), tokens, 1)
    return col.result()


def _mlp(col: _Collector, prefix: str, hidden: int, ffn: int, tokens: int, count: int, gate_up: str) -> None:
    if gate_up == "fused":
        col.linear(f"{prefix}-gate-up", hidden, 2 * ffn, tokens, count)
    else:
        col.linear(f"{prefix}-gate", hidden, ffn, tokens, count)
        col.linear(f"{prefix}-up", hidden, ffn, tokens, count)
    col.linear(f"{prefix}-down", ffn, hidden, tokens, count)


def _grouped_mlp(col: _Collector, hidden: int, ffn: int, groups: tuple[int, ...], count: int, gate_up: str) -> None:
    if gate_up == "fused":
        col.grouped_linear("experts-gate-up", hidden, 2 * ffn, groups, count)
    else:
        col.grouped_linear("experts-gate", hidden, ffn, groups, count)
        col.grouped_linear("experts-up", hidden, ffn, groups, count)
    col.grouped_linear("experts-down", ffn, hidden, groups, count)


def expert_tokens(model: ModelConfig, opts: LlmOptions) -> list[int]:
    """Tokens each of one rank's experts receives per layer under ``opts.routing`` (:mod:`mfu_sweep.gemm.routing`)."""
    return local_expert_tokens(opts.tokens, opts.ep, model.experts_per_token, model.num_local_experts,
                               opts.routing, opts.skew, opts.seed)


def _moe_gemms(col: _Collector, model: ModelConfig, opts: LlmOptions, family: str) -> None:
    layers, hidden = model.num_hidden_layers, model.hidden_size
    _shard(model.num_local_experts, opts.ep, "num_local_experts", family)
    width = _shard(model.intermediate_size, opts.tp, "intermediate_size", family)
    col.linear("router", hidden, model.num_local_experts, opts.tokens, layers)
    counts = expert_tokens(model, opts)
    if opts.moe == "grouped":
        _grouped_mlp(col, hidden, width, tuple(counts), layers, opts.gate_up)
        return
    for tokens, experts in sorted(Counter(c for c in counts if c).items(), reverse=True):
        _mlp(col, "experts", hidden, width, tokens, layers * experts, opts.gate_up)


# ---------------------------------------------------------------------------
# deepbench:


@cache
def deepbench_rows() -> tuple[tuple[str, int, int, int, bool, bool], ...]:
    """All rows of the shipped DeepBench list: (set, m, n, k, trans_a, trans_b)."""
    text = resources.files("mfu_sweep").joinpath("data/deepbench.csv").read_text()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    rows = []
    for row in csv.DictReader(lines):
        rows.append((row["set"], int(row["m"]), int(row["n"]), int(row["k"]),
                     row["trans_a"] == "1", row["trans_b"] == "1"))
    return tuple(rows)


def deepbench_gemms(which: str, family: str) -> list[WorkloadGemm]:
    """DeepBench's rows of one set (or ``all``), in the published order, count 1 each."""
    if which not in (*DEEPBENCH_SETS, "all"):
        known = ", ".join((*DEEPBENCH_SETS, "all"))
        raise ShapeError(f"family {family!r}: unknown DeepBench set {which!r} (known: {known})")
    out = []
    for name, m, n, k, ta, tb in deepbench_rows():
        if which in ("all", name):
            layout = ("t" if ta else "n") + ("t" if tb else "n")
            out.append(WorkloadGemm(Shape(1, m, n, k, layout), family, f"deepbench-{name}", NO_PASS, 1))
    return out


# ---------------------------------------------------------------------------
# grid:


def _parse_values(text: str, axis: str, family: str) -> list[int]:
    values: list[int] = []
    for token in filter(None, (t.strip() for t in text.split(","))):
        lo, sep, hi = token.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or int(lo) < 1:
            raise ShapeError(f"family {family!r}: {axis} value {token!r} is not a positive integer or lo-hi range")
        if not sep:
            values.append(int(lo))
            continue
        start, stop = int(lo), int(hi)
        if stop < start:
            raise ShapeError(f"family {family!r}: {axis} range {token!r} ends below its start")
        while start <= stop:
            values.append(start)
            start *= 2
    if not values:
        raise ShapeError(f"family {family!r}: {axis} list is empty")
    return list(dict.fromkeys(values))


def grid_gemms(parts: Sequence[str], family: str) -> list[WorkloadGemm]:
    """``M:N:K[:batch=B]`` value lists to every combination."""
    batch = 1
    if len(parts) == 4 and parts[3].replace(" ", "").lower().startswith("batch="):
        batch = parse_int("batch", parts[3].split("=", 1)[1].strip(), family)
        parts = parts[:3]
    if len(parts) != 3:
        raise ShapeError(f"family {family!r}: grid needs three lists, grid:M1,M2,...:N1,...:K1,...[:batch=B]")
    ms, ns, ks = (_parse_values(p, axis, family) for p, axis in zip(parts, "mnk", strict=True))
    shapes = [Shape(batch, s.m, s.n, s.k) for s in grid_family(ms, ns, ks)]
    return [WorkloadGemm(s, family, "grid", NO_PASS, 1) for s in shapes]


# ---------------------------------------------------------------------------
# entry points


@dataclass(frozen=True)
class LlmSpec:
    """An ``llm:`` spec read: the shipped config, the options, the config with their sizes, the canonical name."""

    shipped: ModelConfig
    opts: LlmOptions
    model: ModelConfig
    family: str


def read_llm_spec(spec: str) -> LlmSpec:
    """Parse and check ``llm:<model>[:key=value]...`` (a :class:`ShapeError` names the bad part)."""
    kind, _, rest = spec.strip().partition(":")
    if kind.strip().lower() != "llm":
        raise ShapeError(f"family {spec!r} is not an llm: family")
    parts = rest.split(":") if rest else []
    if not parts or not parts[0].strip():
        known = ", ".join(sorted(load_models()))
        raise ShapeError(f"family {spec!r}: name a model, e.g. llm:qwen3-32b (known: {known})")
    try:
        shipped = find_model(parts[0])
    except ShapeError as exc:
        raise ShapeError(f"family {spec!r}: {exc}") from None
    opts = parse_llm_options(parts[1:], spec.strip())
    family = canonical_llm(shipped, opts)
    return LlmSpec(shipped, opts, resized(shipped, opts, spec.strip()), family)


def _resolve_llm(parts: Sequence[str], spec: str) -> list[WorkloadGemm]:
    read = read_llm_spec(spec)
    return llm_gemms(read.shipped, read.opts, read.family)


def _resolve_deepbench(parts: Sequence[str], spec: str) -> list[WorkloadGemm]:
    if len(parts) != 1:
        raise ShapeError(f"family {spec!r}: use deepbench:{'|'.join(DEEPBENCH_SETS)}|all")
    which = parts[0].strip().lower()
    return deepbench_gemms(which, f"deepbench:{which}")


def _resolve_grid(parts: Sequence[str], spec: str) -> list[WorkloadGemm]:
    family = "grid:" + ":".join(p.strip().lower().replace(" ", "") for p in parts)
    return grid_gemms(parts, family)


_RESOLVERS: dict[str, Callable[[Sequence[str], str], list[WorkloadGemm]]] = {
    "llm": _resolve_llm, "deepbench": _resolve_deepbench, "grid": _resolve_grid,
}


def resolve_family(spec: str) -> list[WorkloadGemm]:
    """The GEMMs of a family string (see the module docstring for the syntax).

    Raises
    ------
    ShapeError
        The message names the bad part: an unknown kind, model, option or value.

    Examples
    --------
    >>> gemms = resolve_family("llm:llama-3-8b:tokens=8192:tp=2")
    >>> sorted({g.role for g in gemms})[:3]
    ['attn-out', 'attn-score', 'attn-value']
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ShapeError(f"family {spec!r} is empty (known kinds: {', '.join(KINDS)})")
    kind, _, rest = spec.strip().partition(":")
    resolver = _RESOLVERS.get(kind.strip().lower())
    if resolver is None:
        raise ShapeError(f"family {spec!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return resolver(rest.split(":") if rest else [], spec.strip())


def is_square_family(spec: str) -> bool:
    """Whether ``spec`` is ``square``, the sweep's own square family (its size range is the sweep's options)."""
    kind, _, args = spec.strip().partition(":")
    if kind.strip().lower() != "square":
        return False
    if args:
        raise ShapeError(f"family {spec!r}: the square family takes no arguments; its range is --min-flop, "
                         "--max-flop, --points and --align")
    return True


def sweep_shapes(spec: str) -> list[tuple[Shape, str]]:
    """Distinct shapes of a family with its canonical name, for the sweep's task list."""
    gemms = resolve_family(spec)
    return [(s, gemms[0].family) for s in unique_in_order(g.shape for g in gemms)]


def step_flops(gemms: Iterable[WorkloadGemm]) -> float:
    """FLOPs of one step: the sum of count x FLOPs."""
    return sum(g.flops for g in gemms)
