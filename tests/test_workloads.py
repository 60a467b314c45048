"""Workload families: shapes and FLOPs checked against hand arithmetic, DeepBench list, grids, CLI."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch
from click.testing import CliRunner
from torch.utils._python_dispatch import TorchDispatchMode

from mfu_sweep.cli import main
from mfu_sweep.gemm.models import find_model, load_models
from mfu_sweep.gemm.routing import local_expert_tokens
from mfu_sweep.gemm.shape_files import read_shape_rows
from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.gemm.workloads import (
    DEEPBENCH_SETS,
    _Collector,
    deepbench_rows,
    expert_tokens,
    parse_llm_options,
    resolve_family,
    step_flops,
    sweep_shapes,
)
from mfu_sweep.records.results import load_sweeps

LINEAR = {"qkv", "attn-out", "mlp-gate", "mlp-up", "mlp-down", "router", "experts-gate", "experts-up",
          "experts-down"}
ATTN = {"attn-score", "attn-value"}


def flops_of(spec: str, roles: set[str]) -> float:
    return sum(g.flops for g in resolve_family(spec) if g.role in roles)


# --- one layer of each model, by hand -------------------------------------------------------
# Training = forward + dgrad + wgrad = 3 x the forward FLOPs of every linear layer;
# a forward linear (T x d_in) @ (d_in x d_out) is 2*T*d_in*d_out FLOPs.


def test_qwen3_32b_by_hand() -> None:
    T, L = 4096, 64
    hidden, heads, kv, hd, ffn, vocab = 5120, 64, 8, 128, 25600, 151936
    qkv_out = (heads + 2 * kv) * hd            # 10240: q is 64*128 = 8192 wide, k and v 8*128 = 1024 each
    layer_fwd = 2 * T * (hidden * qkv_out       # qkv
                         + heads * hd * hidden  # attn-out, 8192 -> 5120
                         + 3 * hidden * ffn)    # gate, up, down
    assert flops_of("llm:qwen3-32b", LINEAR) == 3 * L * layer_fwd
    assert flops_of("llm:qwen3-32b", {"lm-head"}) == 3 * 2 * T * hidden * vocab
    # one sequence of 4096: QK^T and PV are each 2*heads*T*T*hd per layer, forward
    assert flops_of("llm:qwen3-32b", ATTN) == 3 * L * 2 * (2 * heads * T * T * hd)
    gemms = resolve_family("llm:qwen3-32b")
    assert len(gemms) == (5 + 2 + 1) * 3         # 5 linear roles, 2 attention, lm-head; 3 passes each
    qkv = {g.pass_: g for g in gemms if g.role == "qkv"}
    assert qkv["fwd"].shape == Shape(1, T, qkv_out, hidden, "nt") and qkv["fwd"].count == L   # x @ W.t()
    assert qkv["dgrad"].shape == Shape(1, T, hidden, qkv_out, "nn")                           # dy @ W
    assert qkv["wgrad"].shape == Shape(1, qkv_out, hidden, T, "tn")                           # dy.t() @ x


def test_gpt_oss_20b_by_hand() -> None:
    T, L = 4096, 24
    hidden, heads, kv, hd, width, vocab, experts, top_k = 2880, 64, 8, 64, 2880, 201088, 32, 4
    per_expert = T * top_k // experts           # 512 tokens per expert
    layer_fwd = 2 * T * (hidden * (heads + 2 * kv) * hd   # qkv: 2880 -> 5120
                         + heads * hd * hidden            # attn-out: 4096 -> 2880
                         + hidden * experts)              # router: 2880 -> 32
    layer_fwd += experts * 2 * per_expert * 3 * hidden * width   # 32 experts x (gate, up, down)
    # the same as every token running top_k experts:
    assert experts * per_expert * 3 * hidden * width == T * top_k * 3 * hidden * width
    assert flops_of("llm:gpt-oss-20b", LINEAR) == 3 * L * layer_fwd
    assert flops_of("llm:gpt-oss-20b", {"lm-head"}) == 3 * 2 * T * hidden * vocab
    # 12 full-attention layers over 4096 keys; 12 sliding layers (window 128) as 32 blocks
    # of 128 queries x 256 keys
    full = 2 * (2 * heads * T * T * hd)
    sliding = 2 * (2 * heads * (T // 128) * 128 * 256 * hd)
    assert flops_of("llm:gpt-oss-20b", ATTN) == 3 * (12 * full + 12 * sliding)
    up = [g for g in resolve_family("llm:gpt-oss-20b") if g.role == "experts-up" and g.pass_ == "fwd"]
    assert [(g.shape, g.count) for g in up] == [(Shape(1, 512, 2880, 2880, "nt"), L * experts)]


@pytest.mark.parametrize(("spec", "L", "hidden", "heads", "ffn"), [
    ("llm:llama-3-8b", 32, 4096, 32, 14336),
    ("llm:llama-3-70b", 80, 8192, 64, 28672),
])
def test_llama3_by_hand(spec: str, L: int, hidden: int, heads: int, ffn: int) -> None:
    T, kv, hd, vocab = 4096, 8, 128, 128256
    assert hidden // heads == hd
    layer_fwd = 2 * T * (hidden * (heads + 2 * kv) * hd + hidden * hidden + 3 * hidden * ffn)
    assert flops_of(spec, LINEAR) == 3 * L * layer_fwd
    assert flops_of(spec, {"lm-head"}) == 3 * 2 * T * hidden * vocab
    assert flops_of(spec, ATTN) == 3 * L * 2 * (2 * heads * T * T * hd)
    # 6*N*T: the linear parameters N of all layers plus the LM head
    n_params = L * (hidden * (heads + 2 * kv) * hd + hidden * hidden + 3 * hidden * ffn) + hidden * vocab
    assert flops_of(spec, LINEAR | {"lm-head"}) == 6 * n_params * T


def test_every_pass_has_the_same_flops_per_role() -> None:
    for gemm_role, by_pass in _by_role_and_pass("llm:gpt-oss-20b:tokens=8192:tp=2").items():
        assert len(set(by_pass.values())) == 1, gemm_role


def _by_role_and_pass(spec: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for g in resolve_family(spec):
        out.setdefault(g.role, Counter())[g.pass_] += g.flops
    return out


# --- options ----------------------------------------------------------------------------------


def test_tensor_parallel_shards_megatron_style() -> None:
    gemms = {(g.role, g.pass_): g for g in resolve_family("llm:llama-3-70b:tp=8")}
    T = 4096
    assert gemms["qkv", "fwd"].shape == Shape(1, T, (64 // 8 + 2 * 8 // 8) * 128, 8192, "nt")   # column-parallel
    assert gemms["mlp-up", "fwd"].shape == Shape(1, T, 28672 // 8, 8192, "nt")
    assert gemms["attn-out", "fwd"].shape == Shape(1, T, 8192, 8192 // 8, "nt")                 # row-parallel
    assert gemms["mlp-down", "fwd"].shape == Shape(1, T, 8192, 28672 // 8, "nt")
    assert gemms["lm-head", "fwd"].shape == Shape(1, T, 128256 // 8, 8192, "nt")                 # vocab-parallel
    assert gemms["attn-score", "fwd"].shape == Shape(64 // 8, T, T, 128, "nt")
    # every dimension divides evenly, so one rank does exactly 1/8 of the work
    assert step_flops(resolve_family("llm:llama-3-70b:tp=8")) * 8 == step_flops(resolve_family("llm:llama-3-70b"))


def test_tp_above_kv_heads_replicates_one_kv_head() -> None:
    qkv = [g for g in resolve_family("llm:llama-3-70b:tp=16") if g.role == "qkv" and g.pass_ == "fwd"]
    assert qkv[0].shape.n == (64 // 16 + 2 * 1) * 128


def test_moe_tokens_per_expert_and_expert_parallel() -> None:
    def up(spec: str) -> tuple[Shape, int]:
        [g] = [g for g in resolve_family(spec) if g.role == "experts-up" and g.pass_ == "fwd"]
        return g.shape, g.count

    assert up("llm:gpt-oss-20b:tokens=8192") == (Shape(1, 8192 * 4 // 32, 2880, 2880, "nt"), 24 * 32)
    # ep=4: 8 experts per rank, each fed by 4 ranks' tokens
    assert up("llm:gpt-oss-20b:tokens=8192:ep=4") == (Shape(1, 4 * 8192 * 4 // 32, 2880, 2880, "nt"), 24 * 8)


def test_layout_options() -> None:
    split = [g for g in resolve_family("llm:llama-3-8b:qkv=split") if g.role == "qkv" and g.pass_ == "fwd"]
    assert sorted((g.shape.n, g.count) for g in split) == [(1024, 64), (4096, 32)]   # k and v share one shape
    roles = {g.role for g in resolve_family("llm:llama-3-8b:gate_up=fused:lm_head=0:attn=0")}
    assert roles == {"qkv", "attn-out", "mlp-gate-up", "mlp-down"}
    score = [g for g in resolve_family("llm:llama-3-8b:tokens=8192:seq=2048") if g.role == "attn-score"]
    assert score[0].shape == Shape(4 * 32, 2048, 2048, 128, "nt")


def test_canonical_family_names() -> None:
    assert resolve_family("llm:Qwen3-32B:tokens=4096")[0].family == "llm:qwen3-32b"
    assert resolve_family("llm:meta-llama/Meta-Llama-3-8B:tp=2:tokens=8192")[0].family == \
        "llm:llama-3-8b:tokens=8192:tp=2"
    shapes = sweep_shapes("llm:llama-3-8b")
    assert len(shapes) == len({s for s, _ in shapes}) and {f for _, f in shapes} == {"llm:llama-3-8b"}


@pytest.mark.parametrize(("spec", "fragment"), [
    ("", "empty"),
    ("nope:x", "unknown kind 'nope'"),
    ("llm:qwen3-23b", "known: gpt-oss-20b, llama-3-70b, llama-3-8b, qwen3-32b"),
    ("llm:", "name a model"),
    ("llm:qwen3-32b:tokns=5", "unknown option 'tokns=5'"),
    ("llm:qwen3-32b:tokens=0", "tokens='0' must be a positive integer"),
    ("llm:qwen3-32b:tokens=4096:tokens=8192", "given twice"),
    ("llm:qwen3-32b:tp=3", "num_attention_heads=64 is not divisible"),
    ("llm:qwen3-32b:lm_head=yes", "must be 0 or 1"),
    ("llm:qwen3-32b:qkv=both", "must be one of fused, split"),
    ("llm:qwen3-32b:tokens=6000", "not a multiple of seq=4096"),
    ("llm:gpt-oss-20b:ep=5", "num_local_experts=32 is not divisible"),
    ("deepbench:training", "unknown DeepBench set 'training'"),
    ("grid:1,2:3", "grid needs three lists"),
    ("grid:1,x:2:3", "m value 'x'"),
    ("grid:64-8:2:3", "ends below its start"),
])
def test_bad_specs_name_the_bad_part(spec: str, fragment: str) -> None:
    with pytest.raises(ShapeError, match=None) as info:
        resolve_family(spec)
    assert fragment in str(info.value)


# --- model table -----------------------------------------------------------------------------


def test_model_table_is_complete_and_plausible() -> None:
    models = load_models()
    assert {"qwen3-32b", "gpt-oss-20b", "llama-3-8b", "llama-3-70b"} <= set(models)
    for m in models.values():
        assert m.source_url.startswith("https://huggingface.co/") and m.source_url.endswith("config.json")
        assert m.source_read and m.corroborated_by, m.id
        assert m.num_attention_heads % m.num_key_value_heads == 0, m.id
        assert m.hidden_size % 64 == 0 and m.head_dim in (64, 128), m.id
        assert 1 <= m.intermediate_size / m.hidden_size <= 8, m.id
        assert 32_000 <= m.vocab_size <= 300_000, m.id
        assert (m.num_local_experts == 0) == (m.experts_per_token == 0), m.id
    assert find_model("openai/gpt-oss-20b").id == "gpt-oss-20b"


# --- DeepBench --------------------------------------------------------------------------------


def test_deepbench_matches_the_published_list() -> None:
    counts = Counter(row[0] for row in deepbench_rows())
    assert counts == {"train": 160, "inference-server": 75, "inference-device": 13}
    flops = [2 * m * n * k for _, m, n, k, _, _ in deepbench_rows()]
    assert min(flops) == 2 * 64 * 1 * 1216 == 155_648                         # 0.16 MFLOP
    assert max(flops) == 2 * 8448 * 48000 * 2816 == pytest.approx(2.28e12, rel=2e-3)
    assert deepbench_rows()[0] == ("train", 1760, 16, 1760, False, False)
    train = resolve_family("deepbench:train")
    # 83 distinct M, N, K, most once untransposed and once with trans_a=1: every row is its own problem
    assert len(train) == 160 and len(sweep_shapes("deepbench:train")) == 160
    assert len({(s.m, s.n, s.k) for s, _ in sweep_shapes("deepbench:train")}) == 83
    assert {g.layout for g in train} == {"nn", "tn", "nt"}
    assert [g.shape for g in train][:1] == [Shape(1, 1760, 16, 1760, "nn")]
    assert len(resolve_family("deepbench:all")) == 160 + 75 + 13
    assert set(DEEPBENCH_SETS) == set(counts)


def test_grid_family() -> None:
    gemms = resolve_family("grid:256-1024:512:128,256")
    assert sorted((g.shape.m, g.shape.k) for g in gemms) == [(m, k) for m in (256, 512, 1024) for k in (128, 256)]
    assert {g.shape.batch for g in resolve_family("grid:8:8:8:batch=3")} == {3}


# --- CLI --------------------------------------------------------------------------------------


def test_shapes_command_lists_and_csv_round_trips(tmp_path) -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["shapes", "llm:llama-3-8b:tokens=1024"])
    assert out.exit_code == 0, out.output
    assert "mlp-down" in out.output and "total: 24 GEMMs" in out.output
    csv_out = runner.invoke(main, ["shapes", "deepbench:inference-device", "--csv", "--dtype", "fp32"])
    assert csv_out.exit_code == 0
    path = tmp_path / "s.csv"
    path.write_text(csv_out.output)
    assert len([r.shape for r in read_shape_rows(path)]) == 13
    two = runner.invoke(main, ["shapes", "grid:8:8:8", "grid:16:16:16", "--csv"]).output
    path.write_text(two)
    assert [s.m for s in [r.shape for r in read_shape_rows(path)]] == [8, 16]          # one header for both families
    data = json.loads(runner.invoke(main, ["shapes", "grid:8:8:8,16", "--json"]).output)
    assert [d["shape"]["k"] for d in data] == [8, 16]
    assert "huggingface.co/Qwen/Qwen3-32B" in runner.invoke(main, ["shapes", "--models"]).output


@pytest.mark.parametrize("args", [["shapes", "llm:qwen3-23b"], ["shapes", "grid:1:2"],
                                  ["sweep", "--device", "cpu", "--shapes", "llm:nope"]])
def test_bad_family_is_a_one_line_error(args: list[str]) -> None:
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1
    assert "Traceback" not in out.output and out.output.startswith("Error: family")
    assert len(out.output.strip().splitlines()) == 1


def test_sweep_runs_a_grid_family_on_cpu(tmp_path) -> None:
    path = tmp_path / "grid.json"
    out = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--dtype", "fp32", "--shapes", "grid:32,48:32:16",
                                    "--budget-s", "0.1", "--isolate", "none", "--quiet", "--repeats", "1",
                                    "-o", str(path)])
    assert out.exit_code == 0, out.output
    [sweep] = load_sweeps([path])
    assert sorted(r.shape for r in sweep.records) == [Shape(1, 32, 32, 16), Shape(1, 48, 32, 16)]
    assert {r.family for r in sweep.records} == {"grid:32,48:32:16"}
    assert all(r.ok and math.isfinite(r.median_s) for r in sweep.records)


# --- layouts: what PyTorch's autograd runs -----------------------------------------------------------


class _RecordGemms(TorchDispatchMode):
    """Every aten GEMM a block of PyTorch code dispatches, as (m, n, k, layout) with its operands' real strides."""

    OPS = {"aten.mm": (0, 1), "aten.addmm": (1, 2), "aten.bmm": (0, 1), "aten._grouped_mm": (0, 1)}

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, int, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        where = self.OPS.get(str(func.overloadpacket))
        if where is not None:
            a, b = args[where[0]], args[where[1]]
            layout = "".join("n" if x.stride(-1) == 1 else "t" for x in (a, b))
            self.seen.append((a.shape[-2], b.shape[-1], a.shape[-1], layout))
        return func(*args, **(kwargs or {}))


def _marked(gemms: list) -> list[tuple[int, int, int, str]]:
    return sorted((g.shape.m, g.shape.n, g.shape.k, g.layout) for g in gemms)


def test_linear_layouts_are_what_f_linear_and_its_autograd_run() -> None:
    import torch.nn.functional as F

    T, d_in, d_out = 64, 32, 48
    x = torch.randn(T, d_in, requires_grad=True)
    w = torch.randn(d_out, d_in, requires_grad=True)
    with _RecordGemms() as rec:
        y = F.linear(x, w)
        y.backward(torch.randn_like(y))
    col = _Collector("test")
    col.linear("l", d_in, d_out, T, 1)
    assert sorted(rec.seen) == _marked(col.result())
    assert {g.pass_: g.layout for g in col.result()} == {"fwd": "nt", "dgrad": "nn", "wgrad": "tn"}


def test_attention_layouts_are_what_matmul_and_its_autograd_run() -> None:
    batch, q, kv, hd = 4, 16, 24, 8
    Q, K, V = (torch.randn(batch, n, hd, requires_grad=True) for n in (q, kv, kv))
    with _RecordGemms() as rec:
        out = (Q @ K.transpose(-1, -2)).softmax(-1) @ V
        out.backward(torch.randn_like(out))
    col = _Collector("test")
    col.attention(batch, q, kv, hd, 1)
    assert sorted(rec.seen) == _marked(col.result())


def test_grouped_expert_layouts_are_what_grouped_mm_and_its_autograd_run() -> None:
    groups, d_in, d_out = (32, 0, 48, 16), 24, 40
    x = torch.randn(sum(groups), d_in, requires_grad=True)
    w = torch.randn(len(groups), d_out, d_in, requires_grad=True)
    offs = torch.tensor(groups).cumsum(0).to(torch.int32)
    with _RecordGemms() as rec:
        y = torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
        y.backward(torch.randn_like(y))
    col = _Collector("test")
    col.grouped_linear("e", d_in, d_out, groups, 1)
    assert sorted(rec.seen) == _marked(col.result())
    assert {g.pass_: g.shape.group_dim for g in col.result()} == {"fwd": "m", "dgrad": "m", "wgrad": "k"}


# --- MoE routing and grouped experts --------------------------------------------------------------------


def test_routing_models() -> None:
    assert local_expert_tokens(4096, 1, 4, 32) == [512] * 32
    assert local_expert_tokens(8192, 4, 4, 32, "balanced") == [4 * 8192 * 4 // 32] * 8
    skewed = local_expert_tokens(4096, 1, 4, 32, "skewed", skew=1.0, seed=7)
    assert sum(skewed) == 4096 * 4 and max(skewed) <= 4096          # every token picks 4 distinct experts
    assert skewed == local_expert_tokens(4096, 1, 4, 32, "skewed", skew=1.0, seed=7)   # seeded
    assert skewed != local_expert_tokens(4096, 1, 4, 32, "skewed", skew=1.0, seed=8)
    assert max(skewed) > 3 * 512 and min(skewed) < 512 / 2         # Zipf(1) over 32 experts is far from balance
    flat = local_expert_tokens(4096, 1, 4, 32, "skewed", skew=0.0, seed=7)
    assert max(flat) < 1.2 * 512 and sum(flat) == 4096 * 4          # skew 0 is uniform: balance up to sampling
    assert len(local_expert_tokens(4096, 4, 4, 32, "skewed", seed=1)) == 8
    with pytest.raises(ValueError, match="routing='lopsided'"):
        local_expert_tokens(4096, 1, 4, 32, "lopsided")


def test_grouped_moe_family_counts_flops_from_the_real_token_counts() -> None:
    spec = "llm:gpt-oss-20b:moe=grouped:routing=skewed:seed=3"
    counts = expert_tokens(find_model("gpt-oss-20b"), parse_llm_options(["routing=skewed", "seed=3"], spec))
    experts = {(g.role, g.pass_): g for g in resolve_family(spec) if g.role.startswith("experts")}
    up = experts["experts-up", "fwd"]
    assert up.shape.groups == tuple(counts) and up.shape.m == sum(counts) == 4096 * 4 and up.count == 24
    assert up.shape.flops == 2 * sum(counts) * 2880 * 2880
    assert experts["experts-up", "wgrad"].shape == Shape(1, 2880, 2880, sum(counts), "tn", tuple(counts), "k")
    # one grouped call per layer does exactly the FLOPs of the experts run one by one at the same counts
    split = resolve_family("llm:gpt-oss-20b:routing=skewed:seed=3")
    assert flops_of(spec, LINEAR) == sum(g.flops for g in split if g.role in LINEAR)
    assert flops_of("llm:gpt-oss-20b:moe=grouped", LINEAR) == flops_of("llm:gpt-oss-20b", LINEAR)
    assert resolve_family(spec)[0].family == spec


@pytest.mark.parametrize("spec,fragment", [
    ("llm:gpt-oss-20b:moe=fused", "moe='fused' must be one of split, grouped"),
    ("llm:gpt-oss-20b:routing=zipf", "routing='zipf' must be one of balanced, skewed"),
    ("llm:gpt-oss-20b:skew=-1", "skew='-1' must be a number from 0 to 10"),
    ("llm:gpt-oss-20b:seed=x", "seed='x' must be a non-negative integer"),
])
def test_bad_moe_options_name_the_option(spec: str, fragment: str) -> None:
    with pytest.raises(ShapeError, match=".*") as err:
        resolve_family(spec)
    assert fragment in str(err.value)


@pytest.mark.parametrize("spec", ["96x40x24:nt:m=32,0,48,16", "40x24x96:tn:k=32,0,48,16"])
def test_grouped_gemm_runs_for_real_on_the_cpu_and_is_checked(spec: str) -> None:
    from mfu_sweep.gemm.dtypes import get_dtype
    from mfu_sweep.gemm.shapes import parse_shape
    from mfu_sweep.measure.backends.cpu import CpuBackend
    from mfu_sweep.measure.backends.operands import relative_error
    from mfu_sweep.measure.bench import Task, run_task
    from mfu_sweep.measure.timing import TimingConfig

    shape, backend, fp32 = parse_shape(spec), CpuBackend(), get_dtype("fp32")
    quick = TimingConfig(budget_s=0.02, min_samples=3, max_samples=5, min_block_s=1e-4, warmup_s=0.0)
    rec = run_task(backend, Task(shape=shape, dtype="fp32", timing=quick))
    assert rec.status == "ok" and rec.rel_error < fp32.rel_tolerance and rec.samples_s
    assert rec.flops == 2 * 96 * 40 * 24 and rec.bytes == 4 * (
        (96 * 24 + 4 * 24 * 40 + 96 * 40) if shape.group_dim == "m" else (40 * 96 + 96 * 24 + 4 * 40 * 24))
    inputs = backend.make_inputs(shape, fp32, 1, seed=0)
    inputs.offs = torch.tensor([24, 48, 72, 96], dtype=torch.int32)  # equal groups: every expert's rows moved
    wrong = backend.gemm_fn(shape, fp32, "eager", inputs)(0)
    assert relative_error(inputs, shape, 0, wrong) > 10 * fp32.rel_tolerance


# --- the size options and attn=sdpa: what the model `mfu-sweep steps` builds really runs --------------------------


@pytest.mark.parametrize("opts", [
    "hidden=64:ffn=96:layers=2:heads=4:kv_heads=2:vocab=128:seq=16:tokens=32",
    "hidden=64:ffn=96:layers=1:heads=4:kv_heads=4:vocab=100:tokens=16:qkv=split:gate_up=fused",
    "hidden=48:ffn=64:layers=2:heads=2:kv_heads=1:head_dim=32:vocab=64:seq=8:tokens=24",
])
@pytest.mark.parametrize("model", ["llama-3-8b", "qwen3-32b"])
def test_size_options_and_sdpa_are_the_gemms_the_built_model_runs(model: str, opts: str) -> None:
    from mfu_sweep.measure.steps.models import build
    from mfu_sweep.measure.steps.spec import parse_model_spec

    spec = parse_model_spec(f"llm:{model}:{opts}")
    work = build(spec, "train")
    with _RecordGemms() as rec:
        work.model(**work.batch).backward()
    gemms = resolve_family(work.gemm_family)
    assert ":attn=sdpa" in work.gemm_family and resolve_family(work.gemm_family)[0].family == work.gemm_family
    assert not {"attn-score", "attn-value"} & {g.role for g in gemms}
    want = sorted((g.shape.m, g.shape.n, g.shape.k, g.layout) for g in gemms for _ in range(g.count))
    assert sorted(rec.seen) == want


def test_size_options_replace_the_config() -> None:
    gemms = resolve_family("llm:llama-3-8b:hidden=512:ffn=1536:layers=4:heads=8:kv_heads=4:vocab=8192:tokens=128")
    qkv = next(g for g in gemms if g.role == "qkv" and g.pass_ == "fwd")
    assert (qkv.shape.m, qkv.shape.n, qkv.shape.k, qkv.count) == (128, (8 + 2 * 4) * 64, 512, 4)   # head_dim 512/8
    head = next(g for g in gemms if g.role == "lm-head" and g.pass_ == "fwd")
    assert (head.shape.n, head.shape.k) == (8192, 512)
    # Qwen3's head_dim is its own (128), not hidden/heads: kept unless given
    qwen = next(g for g in resolve_family("llm:qwen3-32b:hidden=512:heads=8:kv_heads=2:layers=1:tokens=64")
                if g.role == "attn-out" and g.pass_ == "fwd")
    assert (qwen.shape.n, qwen.shape.k) == (512, 8 * 128)
    assert resolve_family("llm:llama-3-8b:hidden=4096:layers=2")[0].family == "llm:llama-3-8b:layers=2"
    assert resolve_family("llm:llama-3-8b:attn=sdpa:layers=1")[0].family == "llm:llama-3-8b:attn=sdpa:layers=1"


@pytest.mark.parametrize(("spec", "fragment"), [
    ("llm:llama-3-8b:hidden=0", "option hidden='0' must be a positive integer"),
    ("llm:llama-3-8b:hidden=500", "hidden=500 is not divisible by heads=32"),
    ("llm:llama-3-8b:heads=8:kv_heads=3", "kv_heads=3 does not divide heads=8"),
    ("llm:llama-3-8b:head_dim=33", "head_dim=33 must be even"),
    ("llm:llama-3-8b:attn=flash", "option attn='flash' must be one of 1, 0, sdpa"),
    ("llm:llama-3-8b:layer=2", "unknown option 'layer=2'"),
])
def test_bad_size_options_name_the_option(spec: str, fragment: str) -> None:
    with pytest.raises(ShapeError) as info:
        resolve_family(spec)
    assert fragment in str(info.value) and spec in str(info.value)


def test_size_options_work_in_shapes_and_sweep() -> None:
    spec = "llm:llama-3-8b:hidden=64:ffn=96:layers=1:heads=4:kv_heads=2:vocab=128:tokens=32:attn=sdpa"
    out = CliRunner().invoke(main, ["shapes", spec, "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert {r["role"] for r in rows} == {"qkv", "attn-out", "mlp-gate", "mlp-up", "mlp-down", "lm-head"}
    canonical = "llm:llama-3-8b:tokens=32:attn=sdpa:hidden=64:ffn=96:layers=1:heads=4:kv_heads=2:vocab=128"
    assert sweep_shapes(spec)[0][1] == canonical
