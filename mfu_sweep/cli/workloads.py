"""``mfu-sweep shapes`` and ``mfu-sweep predict``: workload families on the command line.

Registered on the main group by :mod:`mfu_sweep.cli`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import click

from mfu_sweep.analysis.steps.gemm_sum import LEFT_OUT, STEP_KINDS, Part, StepPrediction, predict_step, step_gemms
from mfu_sweep.cli.common import DtypeChoice, allow_invalid_option
from mfu_sweep.cli.common import domain_errors as one_line_errors
from mfu_sweep.cli.contended import exclude_option
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.models import load_models
from mfu_sweep.gemm.shapes import ShapeError, format_groups
from mfu_sweep.gemm.workloads import KINDS, WorkloadGemm, resolve_family, step_flops
from mfu_sweep.records.contention import contention_note
from mfu_sweep.records.results import Sweep

CSV_COLUMNS = ("batch", "m", "n", "k", "layout", "groups", "role", "pass", "count", "flops", "bytes", "intensity",
               "family")


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:.4g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.4g} ms"
    return f"{value * 1e6:.4g} us"


def _percent(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if value >= 0.01 else f"{value * 100:.2g}%"


# ---------------------------------------------------------------------------
# shapes


def _shape_rows(gemms: Sequence[WorkloadGemm], dtype: str) -> list[dict[str, Any]]:
    dt = get_dtype(dtype)
    return [{"batch": g.shape.batch, "m": g.shape.m, "n": g.shape.n, "k": g.shape.k, "role": g.role,
             "pass": g.pass_, "count": g.count, "layout": g.layout,
             "groups": format_groups(g.shape) if g.shape.groups else "", "flops": g.shape.flops,
             "bytes": g.shape.bytes(dt), "intensity": g.shape.intensity(dt), "family": g.family} for g in gemms]


def _print_shape_table(gemms: Sequence[WorkloadGemm], dtype: str) -> None:
    rows = _shape_rows(gemms, dtype)
    click.echo(f"{gemms[0].family}  ({dtype}; counts per step" +
               (" of one rank)" if gemms[0].family.startswith("llm:") else ")"))
    head = (f"{'role':<16} {'pass':<5} {'layout':<6} {'batch':>6} {'m':>7} {'n':>7} {'k':>7} {'count':>6} "
            f"{'GFLOP/call':>11} {'MB/call':>9} {'FLOP/B':>7} {'share':>6}")
    click.echo(head)
    total = step_flops(gemms)
    for r, g in zip(rows, gemms, strict=True):
        share = g.flops / total if total else 0.0
        click.echo(f"{r['role']:<16} {r['pass']:<5} {r['layout']:<6} {r['batch']:>6} {r['m']:>7} {r['n']:>7} "
                   f"{r['k']:>7} "
                   f"{r['count']:>6} {r['flops'] / 1e9:>11.4g} {r['bytes'] / 1e6:>9.4g} {r['intensity']:>7.4g} "
                   f"{share:>6.1%}")
    distinct = len({g.shape for g in gemms})
    calls = sum(g.count for g in gemms)
    click.echo(f"total: {len(gemms)} GEMMs, {distinct} distinct shapes, {calls} calls, {_si(total, 'FLOP')} per step")


def _write_csv(resolved: Sequence[Sequence[WorkloadGemm]], dtype: str) -> str:
    """One CSV for all families (one header), usable as ``sweep --shape-file``."""
    buf = io.StringIO()
    names = " ".join(gemms[0].family for gemms in resolved)
    buf.write(f"# mfu-sweep shapes {names} --dtype {dtype}; usable as --shape-file\n")
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for gemms in resolved:
        writer.writerows(_shape_rows(gemms, dtype))
    return buf.getvalue()


def _print_models() -> None:
    click.echo(f"{'id':<13} {'hidden':>6} {'ffn':>6} {'layers':>6} {'heads':>5} {'kv':>3} {'hd':>4} "
               f"{'vocab':>7} {'experts':>9}  source")
    for m in load_models().values():
        experts = f"{m.experts_per_token}/{m.num_local_experts}" if m.is_moe else "-"
        click.echo(f"{m.id:<13} {m.hidden_size:>6} {m.intermediate_size:>6} {m.num_hidden_layers:>6} "
                   f"{m.num_attention_heads:>5} {m.num_key_value_heads:>3} {m.head_dim:>4} {m.vocab_size:>7} "
                   f"{experts:>9}  {m.source_url}")


@click.command()
@click.argument("families", nargs=-1, metavar="FAMILY[:ARGS]...")
@click.option("--dtype", default="bf16", show_default=True, type=DtypeChoice(),
              help="Element size for the bytes and intensity columns.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout (usable as `sweep --shape-file`).")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@click.option("--models", "list_models", is_flag=True, help="List the known llm: models and their sources.")
@one_line_errors
def shapes(families: tuple[str, ...], dtype: str, as_csv: bool, as_json: bool, list_models: bool) -> None:
    """List a family's GEMMs with role, pass, count per step, FLOPs, bytes and intensity.

    Nothing is run; counts are per training step of one rank for llm: families.

    \b
    Families:
      llm:<model>[:tokens=N][:seq=N][:tp=N][:ep=N][:lm_head=0|1][:attn=0|1|sdpa]
          [:qkv=fused|split][:gate_up=split|fused]
          [:hidden=N][:ffn=N][:layers=N][:heads=N][:kv_heads=N][:head_dim=N][:vocab=N]
      deepbench:train|inference-server|inference-device|all
      grid:M1,M2,..:N1,..:K1,..[:batch=B]   (lo-hi: powers of two from lo to hi)

    \b
    Example:
        mfu-sweep shapes llm:qwen3-32b:tokens=8192:tp=4
        mfu-sweep shapes deepbench:train --csv > deepbench-train.csv
        mfu-sweep shapes grid:256-8192:256-8192:4096
        mfu-sweep shapes --models
    """
    if list_models:
        _print_models()
        return
    if not families:
        raise click.UsageError(f"give a FAMILY (kinds: {', '.join(KINDS)}), or --models")
    resolved = [resolve_family(f) for f in families]
    if as_json:
        click.echo(json.dumps([g.to_json() for gemms in resolved for g in gemms], indent=1))
        return
    if as_csv:
        click.echo(_write_csv(resolved, dtype), nl=False)
        return
    for i, gemms in enumerate(resolved):
        if i:
            click.echo()
        _print_shape_table(gemms, dtype)


# ---------------------------------------------------------------------------
# predict


def family_for(model: str, tokens: int | None, seq: int | None, tp: int | None) -> str:
    """``--model`` plus ``--tokens/--seq/--tp`` as one family string.

    ``model`` is a model id with optional ``:key=value`` options, or a whole
    family string (``llm:...``, ``grid:...``, ``deepbench:...``).
    """
    spec = model.strip()
    if spec.split(":", 1)[0].lower() not in KINDS:
        spec = f"llm:{spec}"
    extra = [f"{k}={v}" for k, v in (("tokens", tokens), ("seq", seq), ("tp", tp)) if v is not None]
    if extra and not spec.lower().startswith("llm:"):
        raise ShapeError(f"--tokens, --seq and --tp apply to llm: families, not {spec!r}")
    return ":".join([spec, *extra])


def _print_series(preds: Sequence[StepPrediction], allow_partial: bool) -> None:
    click.echo(f"{'series':<24} {'measured':>8} {'fitted':>6} {'missing':>7} {'GEMM time/step':>15} "
               f"{'TFLOP/s':>8} {'GEMM-only MFU':>13} {'peak TFLOP/s':>12}")
    for p in preds:
        counts = f"{p.shapes('measured'):>8} {p.shapes('fitted'):>6} {p.shapes('missing'):>7}"
        if not p.complete and not allow_partial:
            click.echo(f"{p.label:<24} {counts} {'incomplete':>15}")
            continue
        tag = "" if p.complete else " (partial)"
        tflops = f"{p.tflops:.4g}" if p.tflops is not None else "-"
        mfu = _percent(p.mfu)
        peak = f"{p.peak_tflops:.4g}" if p.peak_tflops else "-"
        click.echo(f"{p.label:<24} {counts} {_seconds(p.step_s):>15} {tflops:>8} {mfu:>13} {peak:>12}{tag}")


def _print_breakdown(title: str, keys: Sequence[str], preds: Sequence[StepPrediction],
                     parts_of: Callable[[StepPrediction], Sequence[Part]]) -> None:
    click.echo(f"\n{title}")
    click.echo(f"{'':<16} " + " ".join(f"{p.label[:22]:>22}" for p in preds))
    tables = [({part.key: part for part in parts_of(p)}, p.step_s) for p in preds]
    for key in keys:
        cells = []
        for parts, step in tables:
            part = parts.get(key)
            cells.append(f"{_seconds(part.seconds)} {part.seconds / step:>4.0%}" if (part and step) else "-")
        click.echo(f"{key:<16} " + " ".join(f"{c:>22}" for c in cells))


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--model", default=None, metavar="MODEL[:OPTS]",
              help="Model id (see `shapes --models`) with optional :key=value options, or a whole family string. "
                   "Needed with sweep files alone; a step file names its model.")
@click.option("--kind", default=None, type=click.Choice(STEP_KINDS),
              help="train: every GEMM of the step (forward, data and weight gradients); infer: the forward pass's "
                   "GEMMs only [train; with step files: theirs].")
@click.option("--tokens", type=click.IntRange(1), default=None, help="Tokens per step and rank [4096].")
@click.option("--seq", type=click.IntRange(1), default=None, help="Sequence length [min(tokens, 4096)].")
@click.option("--tp", type=click.IntRange(1), default=None, help="Tensor-parallel degree [1].")
@click.option("--dtype", default=None, type=DtypeChoice(),
              help="Dtype of the records to match [bf16; with step files: theirs].")
@click.option("--mode", default=None, type=click.Choice(["eager", "compile", "lazy"]),
              help="Mode of the records or runs to match (eager, torch.compile, or lazy: an XLA graph) [eager; with "
                   "--steps or step files: all].")
@click.option("--no-fit", is_flag=True, help="Never fill unmeasured shapes from a roofline fit.")
@click.option("--allow-partial", is_flag=True, help="Show series that miss shapes, labelled partial.")
@click.option("--steps", "steps", multiple=True, metavar="N[,N...]|LO-HI",
              help="Time to N steps, first-call costs included, for these step counts (a list, or a range LO-HI "
                   "in 1-2-5 steps); with break-even N of compile and crossovers in N. Repeatable.")
@click.option("--n-boot", type=click.IntRange(100, 1_000_000), default=2000, show_default=True,
              help="Bootstrap draws for the --steps intervals (over the passes of sweeps, the runs of step files).")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
              help="Seed of the --steps bootstrap.")
@exclude_option
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@allow_invalid_option
@one_line_errors
def predict(files: tuple[str, ...], model: str | None, kind: str | None, tokens: int | None, seq: int | None,
            tp: int | None, dtype: str | None, mode: str | None, no_fit: bool, allow_partial: bool,
            steps: tuple[str, ...], n_boot: int, seed: int, exclude_contended: bool, as_json: bool) -> None:
    """Predict the time of one model step from step files or sweep files.

    From step files (`mfu-sweep steps`: a real model's step measured in
    fresh processes): time to N steps per device, mode and compile cache,
    the first step (compile included, with its breakdown), the steady step
    and N steps, each with a 95% interval over the runs; from which N
    compile finishes first and the N where the leader changes. Runs that did
    not finish are counted ("did not compile within 600 s: 1 of 3 runs"); a
    series with none finished is "not finished". Sweeps of the model's GEMM
    family given beside are its breakdown, "of which GEMMs": the GEMM sum's
    share of the measured steady step, beside the profiler's.

    From sweep files alone (--model): the GEMM time and GEMM-only MFU of one
    step. Each GEMM of the step (--kind infer: of its forward pass) is
    matched to a record by shape, dtype and mode; the step time is the sum of
    count x median time, per series (device label). Sweep the shapes first
    with `sweep --shapes llm:...`. Unmeasured shapes come from the series'
    roofline fit when one is available, else the series is incomplete. Only
    GEMMs are counted: see the list printed at the end for what is left out.
    With --steps: time to N steps from the GEMMs' first calls (compile, once)
    and steady times, 95% intervals from the passes, break-even N, crossovers
    in N, and per shape the calls until compile pays. A shape that timed out
    or failed makes its series "did not finish".

    Records and runs flagged contended are kept and counted in a note;
    --exclude-contended leaves them out.

    \b
    Example:
        mfu-sweep steps --device cpu --model MODEL --mode eager --mode compile --repeats 3 -o steps.json
        mfu-sweep predict steps.json --steps 1-100000
        mfu-sweep predict steps.json cpu-sweep.json --json
        mfu-sweep sweep --device cuda --shapes llm:qwen3-32b:tokens=8192 -o h100.json
        mfu-sweep predict h100.json trn2.json --model qwen3-32b --tokens 8192
        mfu-sweep predict sweeps/*.json --model llama-3-70b:lm_head=0 --tp 8 --kind infer --json
        mfu-sweep predict h100.json --model qwen3-32b --tokens 8192 --steps 1,100,10000
    """
    from mfu_sweep.cli.contended import apply
    from mfu_sweep.cli.progress import load_inputs

    sweeps, step_files = load_inputs(files)
    if step_files:
        from mfu_sweep.cli.steps import predict_from_step_files

        given = {"--model": model, "--tokens": tokens, "--seq": seq, "--tp": tp, "--no-fit": no_fit,
                 "--allow-partial": allow_partial}
        predict_from_step_files(step_files, sweeps, kind=kind, dtype=dtype, mode=mode, steps=steps, n_boot=n_boot,
                                seed=seed, exclude=exclude_contended, as_json=as_json,
                                ignored=[name for name, value in given.items() if value])
        return
    if model is None:
        raise click.UsageError("give --model with sweep files (a step file of `mfu-sweep steps` names its model)")
    note = contention_note(sweeps, excluded=exclude_contended)
    sweeps = apply(sweeps, exclude_contended, echo=not steps)  # with --steps the note is the result's
    gemms = step_gemms(resolve_family(family_for(model, tokens, seq, tp)), kind or "train")
    if steps:
        _predict_steps(sweeps, gemms, dtype or "bf16", mode, steps, n_boot, seed, as_json,
                       ignored={"--no-fit": no_fit, "--allow-partial": allow_partial}, kind=kind or "train",
                       notes=(note,) if note else ())
        return
    preds = predict_step(sweeps, gemms, dtype=dtype or "bf16", mode=mode or "eager", use_fit=not no_fit)
    if as_json:
        click.echo(json.dumps({"family": gemms[0].family, "step_kind": kind or "train",
                               "predictions": [p.to_json() for p in preds]}, indent=1))
    else:
        _print_report(gemms, preds, allow_partial, kind or "train")
    if not any(p.complete for p in preds) and not allow_partial:
        raise click.ClickException(
            f"no series measured every shape of {gemms[0].family}; sweep them with "
            f"`mfu-sweep sweep --shapes {gemms[0].family}`, or pass --allow-partial")


def _print_report(gemms: Sequence[WorkloadGemm], preds: Sequence[StepPrediction], allow_partial: bool,
                  kind: str = "train") -> None:
    first = preds[0]
    calls = sum(g.count for g in gemms)
    distinct = len({g.shape for g in gemms})
    what = "one step" if kind == "train" else "one inference step (forward pass only)"
    click.echo(f"{first.family}  {first.dtype} {first.mode}: GEMMs of {what} "
               f"({distinct} distinct shapes, {calls} calls, {_si(step_flops(gemms), 'FLOP')})")
    _print_series(preds, allow_partial)
    shown = [p for p in preds if p.complete or allow_partial]
    if shown:
        _print_breakdown("time by role (share of the series' GEMM time):",
                         list(dict.fromkeys(g.role for g in gemms)), shown, StepPrediction.by_role)
        _print_breakdown("time by pass:", list(dict.fromkeys(g.pass_ for g in gemms)), shown, StepPrediction.by_pass)
    warnings = [w for p in preds for w in p.warnings]
    if warnings:
        click.echo("\nwarnings:")
        for w in warnings:
            click.echo(f"  - {w}")
    click.echo("\nGEMM-only prediction; not included:")
    for item in LEFT_OUT:
        click.echo(f"  - {item}")


def _predict_steps(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], dtype: str, mode: str | None,
                   steps: tuple[str, ...], n_boot: int, seed: int, as_json: bool, ignored: dict[str, bool],
                   kind: str = "train", notes: tuple[str, ...] = ()) -> None:
    from mfu_sweep.analysis.steps.counts import parse_steps
    from mfu_sweep.analysis.steps.time_to_n import predict_steps
    from mfu_sweep.cli.steps import echo_steps

    given = [name for name, on in ignored.items() if on]
    if given:
        raise click.UsageError(f"{' and '.join(given)} do not apply to --steps: a first call cannot be fitted, and "
                               "a series that misses a shape has no first step")
    result = predict_steps(sweeps, gemms, dtype=dtype, modes=None if mode is None else (mode,),
                           steps=parse_steps(steps), n_boot=n_boot, seed=seed, step_kind=kind)
    echo_steps(replace(result, notes=(*result.notes, *notes)), gemms, as_json)
