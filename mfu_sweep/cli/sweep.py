"""``mfu-sweep sweep``: measure GEMM shapes on a device (the parent process stays torch-free)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from mfu_sweep.cli.common import (
    DtypeChoice,
    domain_errors,
    invoked_argv,
    json_output,
    label_text,
    positive_float,
    require_torch,
    spec_file_option,
)
from mfu_sweep.cli.progress import SweepProgress
from mfu_sweep.cli.refine import loop_settings, refine_options, run_loop
from mfu_sweep.gemm.shapes import MAX_PASSES
from mfu_sweep.measure.planning import (
    ACCEL_RANGE,
    ACCEL_REPEATS,
    BUDGET_ONE_PASS_S,
    BUDGET_PER_PASS_S,
    CPU_RANGE,
    CPU_REPEATS,
    POINTS_PER_DECADE,
)
from mfu_sweep.util.errors import BackendError, with_hint
from mfu_sweep.util.text import counted


def _range_default(end: int) -> str:
    """The default square-family bound ``end`` (0: smallest, 1: largest) as help text, e.g. ``CPU 2e10, else 1e13``."""
    cpu, accel = (f"{x:g}".replace("e+0", "e").replace("e+", "e") for x in (CPU_RANGE[end], ACCEL_RANGE[end]))
    return cpu if cpu == accel else f"CPU {cpu}, else {accel}"


@click.command()
@click.option("--device", default="auto", show_default=True,
              help="cpu, cuda[:i], neuron[:i], xla[:i], accelerator[:i], or auto (the first of CUDA, Neuron, XLA, "
                   "another accelerator, CPU).")
@click.option("--dtype", "dtypes", multiple=True, type=DtypeChoice(),
              help="Data type; repeat for several. Default: fp32 on CPU, bf16 elsewhere.")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["eager", "compile"]),
              help="eager and/or compile (torch.compile); repeat for both. Default: eager.")
@click.option("--compile-mode", default=None, help="torch.compile mode passed through (default, max-autotune, ...).")
@click.option("--shape", "shape_specs", multiple=True, metavar="[B]xMxNxK", help="Explicit shape; repeatable.")
@click.option("--shape-file", type=str, default=None, metavar="FILE",
              help="CSV with a header m,n,k[,batch] (# comments allowed), e.g. from `mfu-sweep shapes ... --csv`; "
                   "optional columns family (kept in the records) and passes (that shape's passes; --repeats "
                   "rises to the largest), as `mfu-sweep refine` writes.")
@click.option("--layout", "layouts", multiple=True, metavar="nn,nt,tn,tt",
              help="Operand layouts to sweep every shape in (comma-separated or repeated): the first letter for "
                   "A, the second for B; n: stored as the product uses it, rows contiguous; t: its transpose is "
                   "stored and the GEMM gets a transposed view (nt is x @ W.t(), nn.Linear's forward). Default: each "
                   "shape's own (a shape file's layout column, a family's natural layout, else nn). The scaled "
                   "dtypes take nt only.")
@click.option("--shapes", "families", multiple=True, metavar="FAMILY[:ARGS]",
              help="Workload family, e.g. llm:qwen3-32b:tokens=8192, deepbench:train, grid:256,512:1024:4096, or "
                   "square (the default square sizes, beside the others); repeatable (see `mfu-sweep shapes`).")
@click.option("--min-flop", type=float, default=None, callback=positive_float,
              help=f"Square family: smallest GEMM in FLOP [{_range_default(0)}].")
@click.option("--max-flop", type=float, default=None, callback=positive_float,
              help=f"Square family: largest GEMM in FLOP [{_range_default(1)}, capped by device memory].")
@click.option("--points", type=click.IntRange(1, 10_000), default=None,
              help=f"Square family: number of log-spaced sizes [{POINTS_PER_DECADE:g} per decade of the range].")
@click.option("--align", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Square family: round sizes to a multiple of this.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, callback=json_output,
              help="Result file, JSON [sweeps/<label>.json].")
@click.option("--label", default=None, callback=label_text,
              help="Series label, kept as given in the file [<chip or name>-<backend>]; the default file name is "
                   "the label with characters other than letters, digits and _.+- turned into -.")
@click.option("--budget-s", type=float, default=None, callback=positive_float,
              help=f"Measurement time budget per shape and pass after the first call "
                   f"[{BUDGET_ONE_PASS_S:g} with one pass, {BUDGET_PER_PASS_S:g} with several].")
@click.option("--repeats", type=click.IntRange(1, MAX_PASSES), default=None, metavar="R",
              help=f"Passes over the shapes, each in its own seeded shuffled order and a fresh worker; every "
                   f"record keeps its pass [CPU {CPU_REPEATS}, else {ACCEL_REPEATS}].")
@click.option("--target-ci", type=float, default=0.01, show_default=True, callback=positive_float,
              help="Stop sampling when the 95% CI half-width of the median is below this fraction.")
@click.option("--min-samples", type=click.IntRange(1, 10_000), default=5, show_default=True,
              help="Fewest timed samples per shape and pass, whatever the CI (never fewer than 3 when the budget "
                   "runs out).")
@click.option("--max-samples", type=click.IntRange(3, 100_000), default=100, show_default=True,
              help="Most timed samples per shape and pass.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True, callback=positive_float,
              help="Per-shape limit in seconds (compile + measurement), counted from the moment the shape starts "
                   "on a ready worker; the shape becomes status timeout.")
@click.option("--start-timeout", "start_timeout_s", type=float, default=300.0, show_default=True,
              callback=positive_float,
              help="Limit in seconds for starting a worker and initialising its device (reported per record as "
                   "worker_start_s), separate from --timeout.")
@click.option("--isolate", type=click.Choice(["sweep", "shape", "none"]), default="sweep", show_default=True,
              help="sweep: one worker process, restarted after a failure; shape: a fresh worker per shape; "
                   "none: in-process (debugging, no timeout).")
@click.option("--cold-compile", is_flag=True, help="Fresh, empty compile caches for every shape.")
@click.option("--no-check", is_flag=True, help="Skip the float64 numerical check.")
@click.option("--chip", default=None, help="Force the spec entry (see `mfu-sweep specs`).")
@spec_file_option
@click.option("--peak-tflops", type=float, default=None, callback=positive_float,
              help="Override the peak TFLOP/s for every swept dtype.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
              help="Seed of the inputs and of every pass's shuffled order.")
@click.option("--resume", is_flag=True,
              help="Continue the output file with the command stored in it, skipping finished records. Options "
                   "given again that say how to measure must agree with the file's; shapes, dtypes and modes "
                   "given again replace the file's; new shapes append, and a shape file with a passes column on "
                   "every row may add passes.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file (not with --resume).")
@click.option("--dry-run", is_flag=True,
              help="Print the shapes, passes, output and the estimated device and wall time (cost model; with "
                   "--resume, what is left and the file's own overhead per shape), then exit without opening the "
                   "device.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--shard", default=None, metavar="I/N",
              help="Run every N-th shape starting at I (0-based), e.g. a Slurm array task; merge the pieces.")
@click.option("--distribute", type=click.Choice(["replicate", "shard"]), default=None,
              help="Under torchrun: every rank runs every shape (replicate, the default) or ranks split them.")
@click.option("--timer", type=click.Choice(["auto", "events", "graph", "profiler", "cputime"]), default="auto",
              show_default=True,
              help="CUDA timer: device events, CUDA-graph replays, or auto (graphs for GEMMs under ~50 us); "
                   "profiler (CUDA and CPU): the GEMM's own time summed from torch.profiler events, CUDA kernels "
                   "or the CPU's matmul ops, without launch and host overheads; cputime (CPU): the CPU time of "
                   "the thread that calls the GEMM, which time others take from the cores does not inflate "
                   "(for a busy machine; the record keeps the wall time beside it).")
@click.option("--on-throttle", type=click.Choice(["keep", "discard", "wait"]), default="keep", show_default=True,
              help="When the GPU throttles (NVML reason or SM clock below 75% of max) while a shape is timed: keep "
                   "the block and flag the shape; discard the block, idle 50 ms and time it again (nvbench); or "
                   "wait before each block until it stops. Needs NVML (--device cuda, nvidia-ml-py).")
@click.option("--soak", type=click.FloatRange(0, 240), default=0.0, show_default=True, metavar="S",
              help="Run a large GEMM for S seconds after opening the device, before the first shape (once per "
                   "run, not per pass).")
@click.option("--fp8-fast-accum", "fast_accum", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="fp8 and fp8-rowwise: torch's use_fast_accum (on: Hopper's faster, lower-precision accumulation, "
                   "what NVIDIA's published fp8 numbers use; off: full-precision accumulation). Each record says "
                   "which (fast_accum).")
@click.option("--cache", type=click.Choice(["rotate", "flush", "none"]), default="rotate", show_default=True,
              help="Keep operands out of cache by rotating operand sets larger than the cache, calls back to "
                   "back (rotate), or by overwriting a cache-sized buffer before each call and timing every call "
                   "alone (flush, as nvbench and triton's do_bench do); or none: one operand set, hot in cache, "
                   "what torch's Timer times (to check the tool against it). The default label gets a -flush "
                   "or -hot suffix.")
@click.option("--threads", type=click.IntRange(1, 4096), default=None,
              help="CPU only: torch intra-op threads (default: torch's choice). The CPU peak estimate "
                   "follows the thread count.")
@refine_options
@domain_errors
def sweep(device: str, dtypes: tuple[str, ...], modes: tuple[str, ...], compile_mode: str | None,
          shape_specs: tuple[str, ...], shape_file: str | None, layouts: tuple[str, ...], families: tuple[str, ...],
          min_flop: float | None, max_flop: float | None,
          points: int | None, align: int, output: str | None, label: str | None, budget_s: float | None,
          repeats: int | None, target_ci: float,
          min_samples: int, max_samples: int, timeout_s: float, isolate: str, cold_compile: bool, no_check: bool,
          chip: str | None, spec_file: str | None, peak_tflops: float | None, seed: int, resume: bool,
          force: bool, dry_run: bool, quiet: bool, timer: str, on_throttle: str, soak: float, fast_accum: str,
          shard: str | None, distribute: str | None,
          cache: str, threads: int | None, start_timeout_s: float, refine_against: tuple[str, ...] = (),
          until: str | None = None, refine_budget: str | None = None, refine_pair: str | None = None) -> None:
    """Measure GEMM throughput over a set of shapes and write a v1 result file.

    The file is written whole when the run starts and ends, and every finished
    shape is a line of its journal (.FILE.journal) in between, which every command
    reads; an interrupted sweep continues with --resume. The sweep ends with its
    device time and its own overhead per shape.

    \b
    Example:
        mfu-sweep sweep --device cpu --dtype fp32 --dtype bf16
        mfu-sweep sweep --device cuda --dtype bf16 --mode eager --mode compile
        mfu-sweep sweep --shape 4096x4096x4096 --shape 2x512x1024x256 -o my.json
        mfu-sweep sweep --device cpu --dry-run
        mfu-sweep sweep --resume -o my.json
        mfu-sweep sweep --device cuda -o h100.json --refine-against mi300x.json --refine-budget 20m
    """
    require_torch("sweep")
    from mfu_sweep.cli.device import device_options_env
    from mfu_sweep.cli.sweep_plan import (
        check_resume_device,
        dry_run_peaks,
        print_dry_run,
        records_done,
        resumed_params,
    )
    from mfu_sweep.gemm.shape_files import forget_shape_files
    from mfu_sweep.measure.backends import auto_backend, parse_device
    from mfu_sweep.measure.distributed import gather_to_rank0, placement
    from mfu_sweep.measure.layouts import in_layouts, runnable_tasks
    from mfu_sweep.measure.planning import (
        default_budget,
        limit_passes,
        make_tasks,
        select_shapes,
        shape_file_passes,
        sweep_repeats,
    )
    from mfu_sweep.measure.sweep import SweepError, SweepPlan, default_label, run_sweep
    from mfu_sweep.measure.timing import TimingConfig
    from mfu_sweep.specs import load_chips
    from mfu_sweep.util.allocator import paused_gc

    if resume and force:
        raise click.ClickException("--resume continues the file and --force overwrites it; pass one of them")
    if output is not None:
        _refuse_early(output)
    if resume:
        ctx = click.get_current_context()
        params = resumed_params(ctx, output, Path(output) if output else _default_output(device, label, cache))
        if params is not None:
            return ctx.invoke(ctx.command, **params)
    loop = loop_settings(refine_against, until, refine_budget, refine_pair)
    place = placement(distribute, shard)
    device = place.device(device)
    req = parse_device(device)
    _check_timer(timer, req.backend)
    if timer != "auto" and cache == "flush":
        raise click.BadParameter(f"{timer!r} cannot be combined with --cache flush, which times every call "
                                 "alone with events", param_hint="--timer")
    if spec_file or chip:
        chips = load_chips(spec_file)  # validates the spec file at the edge
        if chip and chip not in chips:
            raise click.BadParameter(f"unknown chip {chip!r} (see `mfu-sweep specs`)", param_hint="--chip")
    on_cpu = req.backend == "cpu" or (req.backend == "auto" and auto_backend() == "cpu")
    if on_throttle != "keep" and (on_cpu or req.backend in ("neuron", "xla", "accelerator")):
        raise click.BadParameter(f"{on_throttle!r} needs a device that reports throttling: NVML on an NVIDIA GPU "
                                 f"(--device cuda, pip install nvidia-ml-py); {device} reports none",
                                 param_hint="--on-throttle")
    if threads is not None:
        _check_threads(threads, on_cpu)
    if max_samples < min_samples:
        raise click.BadParameter(f"{max_samples} is below --min-samples {min_samples}", param_hint="--max-samples")
    with paused_gc():  # a million-row shape file: a million shapes and tasks, none in a cycle
        shapes = in_layouts(select_shapes(shape_specs, shape_file, families, min_flop, max_flop, points, align,
                                          on_cpu), _layouts(layouts))
        row_passes = shape_file_passes(shape_file)
        forget_shape_files()  # both readers have the file's rows
    repeats = sweep_repeats(repeats, on_cpu, row_passes, len(row_passes) == len(shapes))
    given, budget_s = budget_s, budget_s or default_budget(repeats)
    if budget_s >= timeout_s:  # a bound, not a plan: a shape may stop at its CI target or --max-samples first
        click.echo(f"note: --budget-s {budget_s:g} s{'' if given else ' (the default)'} is not below --timeout "
                   f"{timeout_s:g} s: a shape that runs its whole budget times out; lower --budget-s or raise "
                   "--timeout unless --target-ci or --max-samples stops it first", err=True)
    timing = TimingConfig(target_rel_ci=target_ci, budget_s=budget_s, min_samples=min_samples, max_samples=max_samples)
    dtypes = dtypes or (("fp32",) if on_cpu else ("bf16",))
    modes = modes or ("eager",)
    with paused_gc():
        tasks, notes = runnable_tasks(make_tasks(shapes, dtypes, modes, seed=seed, timing=timing,
                                                 compile_mode=compile_mode, check=not no_check, cache=cache))
    for note in notes:
        click.echo(f"note: {note}", err=True)
    if not tasks:
        raise click.ClickException("no shape is left to sweep: " + "; ".join(notes))
    tasks = place.select(limit_passes(tasks, row_passes))
    suffix = cache_suffix(cache) if label is None else ""
    plan = SweepPlan(
        device=device, tasks=tasks, output=Path(output) if output else Path("sweeps/__pending__.json"),
        label=label, isolate=isolate, timeout_s=timeout_s, cold_compile=cold_compile, spec_file=spec_file,
        chip=chip, peak_tflops=peak_tflops, resume=resume, force=force, argv=invoked_argv(),
        settings={"seed": seed, "timing": vars(timing), "compile_mode": compile_mode, "dtypes": list(dtypes),
                  "modes": list(modes), "timer": timer, "soak_s": soak, "cache": cache, "threads": threads,
                  **({"on_throttle": on_throttle} if on_throttle != "keep" else {}),
                  **({"fp8_fast_accum": fast_accum} if {"fp8", "fp8-rowwise"} & set(dtypes) else {}),
                  **place.settings()},
        label_suffix=suffix + place.label_suffix, repeats=repeats, start_timeout_s=start_timeout_s,
    )
    if output is None:
        plan = _plan_with_default_output(plan, label, default_label, suffix)
    final_output = plan.output
    plan = replace(plan, output=place.output(plan.output))
    if dry_run:
        if resume:
            check_resume_device(plan.output, auto_backend() if req.backend == "auto" else req.backend)
        named = label if label is not None else _default_output(device, label, cache).stem
        with paused_gc():
            print_dry_run(tasks, repeats, timing, isolate, plan.output,
                          dry_run_peaks(on_cpu, threads, chip, spec_file, peak_tflops, dtypes),
                          records_done(plan.output) if resume else [], f"{device} (label {named})")
        if plan.output.exists() and not (resume or force):
            click.echo(f"note: {plan.output} exists; the run needs --resume (continue it) or --force (overwrite)")
        return
    if loop:
        _check_loop(loop, plan, budget_s, place)
    started = time.monotonic()
    bar = SweepProgress(quiet)
    try:
        with device_options_env(timer, soak, threads, on_throttle, fast_accum):
            result = run_sweep(plan, progress=bar.update, on_start=bar.start, on_pass=bar.new_pass,
                               notify=lambda note: click.echo(f"note: {note}", err=True))
    except SweepError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        bar.close()
        click.echo(f"\ninterrupted: finished shapes are saved in {plan.output}; "
                   f"continue with `mfu-sweep sweep --resume -o {plan.output}` (it reads the settings from the file)",
                   err=True)
        sys.exit(130)
    except RuntimeError as exc:  # BackendError too: the worker could not open the device
        raise click.ClickException(with_hint(str(exc)) if isinstance(exc, BackendError) else str(exc)) from None
    except OSError as exc:  # e.g. the disk filled up during the sweep
        raise click.ClickException(_write_failed(exc, plan.output)) from None
    finally:
        bar.close()
    from mfu_sweep.present.report.headline import sweep_headline
    from mfu_sweep.records.summaries import compile_summary, summary_line

    click.echo(f"{result.device['label']}: {summary_line(result.records)}"
               + (f" over {result.settings['repeats']} passes" if result.settings.get("repeats", 1) > 1 else ""))
    from mfu_sweep.measure.checkpoint import sweep_cost

    cost = sweep_cost(result.records[bar.before:])
    if cost.shapes:
        click.echo(cost.line())
    cap = result.settings.get("memory_cap")
    if cap:
        one = len(cap["dropped"]) == 1
        click.echo(f"capped by device memory: {counted(len(cap['dropped']), 'square shape')} "
                   f"{'needs' if one else 'need'} more than {cap['fraction']:.0%} of "
                   f"{cap['memory_bytes'] / 2**30:.0f} GiB and {'was' if one else 'were'} left out; the largest "
                   f"kept is {cap['max_flops_kept'] or 0:.3g} FLOP", err=True)
    from mfu_sweep.records.contention import contention_note

    busy = contention_note([result])
    if busy:
        click.echo(busy, err=True)
        if timer == "auto" and result.device.get("backend") == "cpu":
            click.echo(f"hint: {CPUTIME_HINT}", err=True)
    tax = compile_summary(result.records)
    if tax:
        click.echo(f"time to first result: {tax}")
    click.echo(f"wrote {plan.output}")
    click.echo(sweep_headline([result], plan.output))
    if loop:
        run_loop(loop, plan, lambda p: _measure(p, quiet, timer, soak, threads, on_throttle, fast_accum),
                 time.monotonic() - started)
    if place.launcher and place.world > 1:
        docs = gather_to_rank0(result, place)
        if docs is not None:
            _write_gathered(docs, final_output)
            click.echo(f"rank 0 gathered {place.world} ranks into {final_output}")


CPUTIME_HINT = ("--timer cputime times the CPU time of the thread that calls the GEMM, which others' use of the cores "
                "does not inflate (docs/fidelity.md)")


def _check_timer(timer: str, backend: str) -> None:
    """Refuse a ``--timer`` the device does not have: events and graph are CUDA's, profiler CUDA's and the CPU's,
    cputime the CPU's (``--device auto`` must resolve to the CPU)."""
    from mfu_sweep.measure.backends import auto_backend

    if timer == "cputime":
        if backend == "cpu" or (backend == "auto" and auto_backend() == "cpu"):
            return
        raise click.BadParameter("'cputime' applies to --device cpu only", param_hint="--timer")
    if timer != "auto" and backend not in ("cuda", "auto") and not (timer == "profiler" and backend == "cpu"):
        where = "--device cuda or cpu" if timer == "profiler" else "--device cuda"
        raise click.BadParameter(f"{timer!r} applies to {where} only", param_hint="--timer")


def _layouts(given: tuple[str, ...]) -> tuple[str, ...] | None:
    """``--layout`` values (comma-separated or repeated), validated; None when not given."""
    from mfu_sweep.gemm.shapes import ShapeError, parse_layouts

    if not given:
        return None
    try:
        return parse_layouts(",".join(given))
    except ShapeError as exc:
        raise click.BadParameter(str(exc), param_hint="--layout") from None


def _check_loop(loop: Any, plan: Any, budget_s: float, place: Any) -> None:
    from mfu_sweep.workflow.loop import check_budget

    if place.world > 1 or place.launcher or place.shard_count > 1:
        raise click.BadParameter("the refinement loop runs on one process; refine sharded or torchrun sweeps "
                                 "with `mfu-sweep refine`", param_hint="--refine-against")
    check_budget(loop.budget_s, len(plan.tasks), budget_s)


def _measure(plan: Any, quiet: bool, timer: str, soak: float, threads: int | None, on_throttle: str = "keep",
             fast_accum: str = "on") -> Any:
    """One resumed sweep of the refinement loop, with the same device options and progress bar."""
    from mfu_sweep.cli.device import device_options_env
    from mfu_sweep.measure.sweep import SweepError, run_sweep

    bar = SweepProgress(quiet)
    try:
        with device_options_env(timer, soak, threads, on_throttle, fast_accum):
            return run_sweep(plan, progress=bar.update, on_start=bar.start, on_pass=bar.new_pass)
    except SweepError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        bar.close()


def _write_failed(exc: OSError, output: Path) -> str:
    """One line for a write that failed mid-sweep: why, and that the finished shapes are kept."""
    from mfu_sweep.util.outputs import os_error_message

    line = os_error_message(exc, exc.filename or output)
    if output.exists():
        line += f"; the finished shapes are kept in {output}: continue with `mfu-sweep sweep --resume -o {output}`"
    return line


def _write_gathered(docs: list[dict[str, Any]], final: Path) -> None:
    """Rank 0: merge every rank's sweep into one file."""
    from mfu_sweep.analysis.sources.merge import merge_sweeps
    from mfu_sweep.records.results import parse_document, write_json_atomic

    # the ranks' live sweeps, not files: an unknown value may still be NaN here (writing makes it null), which
    # the checks of a file would refuse
    sweeps = [s for i, d in enumerate(docs) for s in parse_document(d, source=f"rank {i}", validate=False)]
    write_json_atomic(final, merge_sweeps(sweeps).to_json())


def _check_threads(threads: int, on_cpu: bool) -> None:
    from mfu_sweep.measure.task import check_threads

    if not on_cpu:
        raise click.BadParameter(f"{threads} applies to the CPU device only", param_hint="--threads")
    try:
        check_threads(threads)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--threads") from None


def _plan_with_default_output(plan: Any, label: str | None, default_label: Callable[[dict], str],
                              suffix: str = "") -> Any:
    """Resolve sweeps/<label>.json before the sweep starts, without opening the device here.

    On a CPU the label comes from /proc/cpuinfo (what the worker will report);
    accelerators are named after the --device value: opening one in this process
    could hold it (Neuron cores and TPUs belong to one process).
    """
    return replace(plan, output=_default_output(plan.device, label, suffix=suffix), label=plan.label)


def cache_suffix(cache: str) -> str:
    """The default label's suffix for a cache policy: none for rotate, ``-flush``, ``-hot`` for none."""
    return {"flush": "-flush", "none": "-hot"}.get(cache, "")


def _refuse_early(output: str) -> None:
    """``-o -``, a name too long, and a device node, FIFO or socket at ``-o`` are refused before anything else
    (before ``--resume`` reads the file)."""
    from mfu_sweep.measure.sweep import NO_STDOUT
    from mfu_sweep.util.outputs import OutputError, check_name, check_replaceable, is_stdout

    if is_stdout(output):
        raise OutputError(f"-o - means standard output, but {NO_STDOUT}")
    check_name(output)
    check_replaceable(output)


def _default_output(device: str, label: str | None, cache: str = "rotate", suffix: str | None = None) -> Path:
    """``sweeps/<label>.json`` for ``--device`` and ``--label`` (plus :func:`cache_suffix` of ``--cache``), the
    label made a safe file name (:func:`mfu_sweep.util.names.safe_name`: never outside ``sweeps/``)."""
    from mfu_sweep.measure.backends import auto_backend
    from mfu_sweep.specs.cpu import default_cpu_label
    from mfu_sweep.util.names import safe_name

    if suffix is None:
        suffix = cache_suffix(cache) if label is None else ""
    if label is None:
        picked = auto_backend() if device == "auto" else device
        label = default_cpu_label() if picked.startswith("cpu") else picked.replace(":", "-")
    return Path("sweeps") / f"{safe_name(label + suffix)}.json"
