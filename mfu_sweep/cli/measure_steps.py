"""``mfu-sweep steps``: measure a real model's steps, eager and compiled, cold and warm caches (torch-free parent)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from mfu_sweep.cli.common import domain_errors, invoked_argv, json_output, label_text, positive_float, require_torch
from mfu_sweep.measure.steps.spec import STEP_DTYPES

# The modes each device stack runs a model's step in (the lazy graph is XLA's: torch-xla or XLA torch-neuronx).
DEVICE_MODES = {"xla": ("lazy",), "cpu": ("eager", "compile"), "cuda": ("eager", "compile"),
                "neuron": ("eager", "compile"), "accelerator": ("eager", "compile")}
RESUMABLE = ("device", "kind", "dtype", "modes", "compile_mode", "caches", "repeats", "steps", "warmup",
             "profile_steps", "timeout_s", "start_timeout_s", "threads")


def _backend(device: str) -> str:
    from mfu_sweep.measure.backends import auto_backend, parse_device

    req = parse_device(device)
    return auto_backend() if req.backend == "auto" else req.backend


def _check_modes(modes: tuple[str, ...], backend: str, device: str) -> None:
    runs = DEVICE_MODES.get(backend, ("eager", "compile"))
    for mode in modes:
        if mode not in runs:
            why = ("lazy is the XLA graph mode: --device xla" if mode == "lazy" else
                   f"{device} runs a model as a lazy XLA graph (--mode lazy)")
            raise click.BadParameter(f"{mode!r} does not run on {device}: {why}", param_hint="--mode")


def _from_file(ctx: click.Context, output: str, params: dict[str, Any]) -> dict[str, Any]:
    """``--resume``: options not given on the command line are the file's."""
    from mfu_sweep.records.step_files import load_step_file

    if not Path(output).exists():
        return params
    old = load_step_file(output)
    settings = dict(old.settings)
    stored = {"device": settings.get("device"), "kind": old.step_kind, "dtype": old.dtype,
              "modes": tuple(settings.get("modes") or ()), "compile_mode": settings.get("compile_mode"),
              "caches": tuple(settings.get("caches") or ()), "repeats": settings.get("repeats"),
              "steps": settings.get("steps"), "warmup": settings.get("warmup_steps"),
              "profile_steps": settings.get("profile_steps"), "timeout_s": settings.get("timeout_s"),
              "start_timeout_s": settings.get("start_timeout_s"), "threads": settings.get("threads")}
    out = dict(params)
    for name in RESUMABLE:
        if ctx.get_parameter_source(name) in (click.core.ParameterSource.DEFAULT, None) and stored[name] is not None:
            out[name] = stored[name]
    if out.get("model") is None:
        out["model"] = old.model.spec
    return out


@click.command()
@click.option("--device", default="auto", show_default=True,
              help="cpu, cuda[:i], neuron[:i], xla[:i], accelerator[:i], or auto.")
@click.option("--model", default=None, metavar="MODEL",
              help="llm:NAME[:key=value...] (a shipped config, with size options hidden, ffn, layers, heads, "
                   "kv_heads, head_dim, vocab and tokens, seq, qkv, gate_up; see `shapes --models`), "
                   "hf:CONFIG[:tokens=N][:seq=N] (a transformers config.json, or a model id in the local cache; "
                   "the hf extra), or py:FILE.py:FUNCTION (FUNCTION() returns (model, batch)). Random weights, "
                   "nothing downloaded. Required, except with --resume.")
@click.option("--kind", type=click.Choice(["train", "infer"]), default="train", show_default=True,
              help="train: forward, loss, backward, AdamW step; infer: the forward without autograd.")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["eager", "compile", "lazy"]),
              help="eager, compile (torch.compile) and, on XLA devices, lazy (the XLA graph; its first step "
                   "compiles it); repeat for several [eager and compile; lazy on --device xla].")
@click.option("--compile-mode", type=click.Choice(["default", "reduce-overhead", "max-autotune"]), default="default",
              show_default=True, help="torch.compile's mode for --mode compile.")
@click.option("--cache", "caches", multiple=True, type=click.Choice(["cold", "warm"]),
              help="Compile caches of compile and lazy runs: cold (fresh process, empty private caches) and/or "
                   "warm (fresh process, a private cache primed by an earlier run of the model); repeatable "
                   "[both].")
@click.option("--repeats", type=click.IntRange(1, 100), default=3, show_default=True, metavar="R",
              help="Fresh-process runs per mode and cache (the intervals come from them).")
@click.option("--steps", type=click.IntRange(2, 100_000), default=10, show_default=True, metavar="K",
              help="Steps per run: step 1 (the compile), --warmup more, then the steady steps (their median).")
@click.option("--warmup", type=click.IntRange(0, 100_000), default=2, show_default=True,
              help="Steps after step 1 left out of the steady step.")
@click.option("--profile-steps", type=click.IntRange(0, 1000), default=2, show_default=True,
              help="Extra steady steps under torch.profiler after the timed ones, for the GEMM share (0: none).")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True, callback=positive_float,
              help="Per run: seconds for step 1, counted once the model is built; a run past it is killed and "
                   "recorded 'did not compile within T s' (status timeout). Each later step has as long.")
@click.option("--start-timeout", "start_timeout_s", type=float, default=300.0, show_default=True,
              callback=positive_float,
              help="Per run: seconds to start the process, import torch and build the model on the device.")
@click.option("--dtype", type=click.Choice(list(STEP_DTYPES)), default=None,
              help="The model's weights and activations [fp32 on CPU, bf16 elsewhere].")
@click.option("--threads", type=click.IntRange(1, 4096), default=None, help="CPU only: torch intra-op threads.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, callback=json_output,
              help="Step file to write (JSON).")
@click.option("--label", default=None, callback=label_text,
              help="Device label [as a sweep's: <chip or name>-<backend>].")
@click.option("--resume", is_flag=True,
              help="Continue the output file: its finished runs are kept, the missing ones run. Options not given "
                   "are the file's; what a run measures (model, kind, dtype, steps, warm-up) must agree with it.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file (not with --resume).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@domain_errors
def steps(**params: Any) -> None:
    """Measure a real model's steps, each run a fresh process: step 1, every later step, the steady step.

    Per run: every step's time; the compile breakdown where the stack
    exposes it (dynamo, AOTAutograd, backend; XLA's compile count and
    time), graphs, graph breaks and recompiles, cache hits and misses, peak
    memory, and the GEMM share of the steady step (torch.profiler). A run
    whose step 1 does not finish within --timeout is recorded "did not
    compile within T s"; out of memory is status oom, a crashing compile
    status error with its error class: counted, never dropped. The file is
    written after every run; Ctrl-C keeps the finished runs (--resume goes
    on). `mfu-sweep validate` checks the file.

    \b
    Example:
        mfu-sweep steps --device cpu --kind train --model \\
          llm:llama-3-8b:hidden=512:ffn=1536:layers=4:heads=8:kv_heads=4:vocab=8192:tokens=128 \\
          --mode eager --mode compile --cache cold --cache warm --repeats 3 --timeout 600 -o steps.json
        mfu-sweep steps --device xla --model hf:tiny/config.json:tokens=128 --mode lazy -o xla-steps.json
        mfu-sweep steps --resume -o steps.json
    """
    require_torch("steps")
    ctx = click.get_current_context()
    if params["resume"]:
        params = _from_file(ctx, params["output"], params)
    _measure(**params)


def _plan(device: str, model: str | None, kind: str, modes: tuple[str, ...], compile_mode: str,
          caches: tuple[str, ...], repeats: int, steps: int, warmup: int, profile_steps: int, timeout_s: float,
          start_timeout_s: float, dtype: str | None, threads: int | None, output: str, label: str | None,
          resume: bool, force: bool) -> Any:
    from mfu_sweep.measure.steps.loop import StepPlan
    from mfu_sweep.measure.steps.spec import check_dtype, parse_model_spec

    if model is None:
        raise click.UsageError("give --model (llm:..., hf:... or py:FILE.py:FUNCTION), or --resume an existing file")
    spec = parse_model_spec(model)
    backend = _backend(device)
    modes = tuple(dict.fromkeys(modes or DEVICE_MODES.get(backend, ("eager", "compile"))))
    _check_modes(modes, backend, device)
    if steps < warmup + 2:
        raise click.BadParameter(f"{steps} leaves no steady step after step 1 and --warmup {warmup}: give at least "
                                 f"{warmup + 2}", param_hint="--steps")
    if threads is not None and backend != "cpu":
        raise click.BadParameter(f"{threads} applies to the CPU device only", param_hint="--threads")
    dtype = dtype or ("fp32" if backend == "cpu" else "bf16")
    check_dtype(dtype)
    if caches and set(modes) == {"eager"}:
        click.echo("note: --cache applies to compile and lazy runs; eager runs compile nothing", err=True)
    return StepPlan(device=device, model=spec.text, output=Path(output), kind=kind, dtype=dtype, modes=modes,
                    compile_mode=compile_mode, caches=tuple(dict.fromkeys(caches or ("cold", "warm"))),
                    repeats=repeats, steps=steps, warmup=warmup, profile_steps=profile_steps, timeout_s=timeout_s,
                    start_timeout_s=start_timeout_s, label=label, threads=threads, resume=resume, force=force,
                    argv=invoked_argv())


def _measure(quiet: bool, **params: Any) -> None:
    from mfu_sweep.measure.steps.loop import StepsError, environment_note, run_steps
    from mfu_sweep.records.step_files import series_line, summary_line

    plan = _plan(**params)
    note = environment_note()
    if note:
        click.echo(f"note: {note}", err=True)
    bar = _Progress(quiet)
    try:
        result = run_steps(plan, progress=bar.update, on_start=bar.start, on_step=bar.step,
                           notify=lambda text: click.echo(f"note: {text}", err=True))
    except StepsError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        bar.close()
        click.echo(f"\ninterrupted: finished runs are kept in {plan.output}; continue with "
                   f"`mfu-sweep steps --resume -o {plan.output}` (it reads the settings from the file)", err=True)
        sys.exit(130)
    finally:
        bar.close()
    click.echo(summary_line(result))
    for series, runs in result.series().items():
        click.echo(f"  {series_line(series, runs)}")
    click.echo(f"wrote {plan.output}")


class _Progress:
    """One bar over the runs on stderr (a plain line per run in a log): the run, its step, its first step."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.name = ""

    def start(self, steps: Any, total: int) -> None:
        from mfu_sweep.util.progress import Progress

        click.echo(f"device: {steps.label} ({steps.device.get('name')}); model: {steps.model.spec} "
                   f"({steps.model.params or 0:,} parameters), {steps.step_kind} {steps.dtype}", err=True)
        self.bar = Progress("steps", total, unit="run", quiet=self.quiet, close_line=True)

    def update(self, slot: Any, run: Any) -> None:
        from mfu_sweep.records.step_files import series_name

        if self.bar is None:
            return
        self.name = f"{series_name((slot.mode, slot.compile_mode, slot.cache))} #{slot.repeat + 1}"
        if run is None:
            self.bar.describe(self.name)
            return
        first = f"first step {run.first_step_s:.3g} s" if run.first_step_s is not None else run.error or run.status
        self.bar.advance(note=f"{self.name}: {first}" if run.ok else f"{self.name}: {run.status}: {first}")

    def step(self, index: int, seconds: float) -> None:
        if self.bar is not None:
            self.bar.describe(f"{self.name} step {index} ({seconds:.3g} s)")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
