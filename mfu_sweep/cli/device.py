"""Device commands: ``ceilings`` and ``selftest``; plus the env hand-off of ``sweep --timer/--soak``.

Both commands open the device in this process (no worker) and finish in
seconds on a CPU. Registered on the main group by :mod:`mfu_sweep.cli`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

import click

from mfu_sweep.cli.common import DtypeChoice, domain_errors, json_output, require_torch, spec_file_option


@contextlib.contextmanager
def device_options_env(timer: str, soak_s: float, threads: int | None = None,
                       on_throttle: str = "keep", fast_accum: str = "on") -> Iterator[None]:
    """Hand ``--timer``, ``--soak``, ``--threads``, ``--on-throttle`` and ``--fp8-fast-accum`` to the sweep's
    workers through their environment; with ``--timer cputime`` also ``OMP_WAIT_POLICY=PASSIVE`` (unless set
    already), so a GEMM thread that waits for another sleeps instead of spinning, which would count as CPU time
    (docs/fidelity.md).

    Workers inherit this process's environment; the variables are restored
    afterwards so in-process callers (tests) see no leftovers. Torch-free:
    the sweep's parent process never imports torch.
    """
    from mfu_sweep.measure.task import FAST_ACCUM_ENV, ON_THROTTLE_ENV, SOAK_ENV, THREADS_ENV, TIMER_ENV

    wanted = {TIMER_ENV: timer, SOAK_ENV: repr(soak_s) if soak_s else None, FAST_ACCUM_ENV: fast_accum,
              THREADS_ENV: str(threads) if threads else None,
              ON_THROTTLE_ENV: on_throttle if on_throttle != "keep" else None}
    if timer == "cputime" and OMP_WAIT_ENV not in os.environ:  # a user's own choice stays
        wanted[OMP_WAIT_ENV] = "PASSIVE"  # threads waiting at a barrier sleep: no spin in the CPU time
    saved = {k: os.environ.get(k) for k in wanted}
    try:
        _set_env(wanted)
        yield
    finally:
        _set_env(saved)


OMP_WAIT_ENV = "OMP_WAIT_POLICY"  # OpenMP's: how a thread waits at a barrier (spin, or sleep when PASSIVE)


def _set_env(values: dict[str, str | None]) -> None:
    """Set each variable, or unset it where the value is None."""
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


DEVICE_HELP = "cpu, cuda[:i], neuron[:i], xla[:i], accelerator[:i], or auto."


@click.command()
@click.option("--device", default="auto", show_default=True, help=DEVICE_HELP)
@click.option("--dtype", "dtypes", multiple=True, type=DtypeChoice(),
              help="GEMM dtype; repeatable. Default: fp32 on CPU, bf16 and fp32 elsewhere.")
@click.option("--size", "sizes", multiple=True, type=click.IntRange(16, 65536),
              help="Square GEMM size to try; repeatable. Default: 256/512/1024 on CPU, 4096/8192/16384 elsewhere.")
@click.option("--budget-s", type=click.FloatRange(0.05, 60), default=0.5, show_default=True,
              help="Measurement budget per shape and for the copy.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, callback=json_output,
              help="Write the block to this JSON file (- : standard output, the summary then on stderr).")
@click.option("--into", "into", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Store the block under the key 'ceilings' of this sweep result file (atomically).")
@click.option("--force", is_flag=True,
              help="Overwrite an existing -o file; with --into: store even if the file's device differs.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the block as JSON on stdout (the summary lines then go to stderr).")
@click.option("--chip", default=None, help="Force the spec entry (see `mfu-sweep specs`).")
@spec_file_option
@domain_errors
def ceilings(device: str, dtypes: tuple[str, ...], sizes: tuple[int, ...], budget_s: float, output: str | None,
             into: str | None, force: bool, as_json: bool, chip: str | None, spec_file: str | None) -> None:
    """Measure achievable copy bandwidth and best GEMM TFLOP/s on a device.

    The copy is device-to-device (bytes read plus written), the GEMMs are the
    few largest squares per dtype; both use the sweep's adaptive timing.

    \b
    Example:
        mfu-sweep ceilings --device cpu
        mfu-sweep ceilings --device cpu --json > cpu-ceilings.json
        mfu-sweep ceilings --device cuda -o h100-ceilings.json
        mfu-sweep ceilings --device cuda --into sweeps/h100-sxm-cuda.json
    """
    require_torch("ceilings")
    from mfu_sweep.measure.backends import resolve_device
    from mfu_sweep.measure.checks.ceilings import CEILING_TIMING, add_to_result, measure_ceilings, summary_lines
    from mfu_sweep.measure.timing import TimingConfig
    from mfu_sweep.records.results import write_json_atomic
    from mfu_sweep.util.outputs import check_output_file, is_stdout

    if as_json and is_stdout(output):
        raise click.ClickException("--json and -o - both print the block on standard output: pass one of them")
    if output:  # fail before measuring when the file cannot be written
        check_output_file(output, force)
    quiet = as_json or is_stdout(output)  # the summary lines go to stderr when stdout carries JSON
    if into:  # fail before measuring when another writer (a sweep) holds the file
        check_output_file(into, force=True, flag="--into")
        from mfu_sweep.util.filelock import output_lock

        with output_lock(into) as lock:
            if lock.note:
                click.echo(f"note: {lock.note}", err=True)
    backend = resolve_device(device)
    timing = TimingConfig(**{**vars(CEILING_TIMING), "budget_s": budget_s})
    block = measure_ceilings(backend, dtypes or None, sizes or None, timing, spec_file, chip)
    dev = block["device"]
    click.echo(f"device: {dev['backend']} {dev['name']!r}; peak: {block['peak']['source'][:100]}", err=quiet)
    for line in summary_lines(block):
        click.echo(line, err=quiet)
    if output:
        write_json_atomic(output, block)  # -o -: standard output
        if not is_stdout(output):
            click.echo(f"wrote {output}", err=quiet)
    if into:
        add_to_result(into, block, force=force)
        click.echo(f"stored as 'ceilings' in {into}", err=quiet)
    if as_json:
        click.echo(json.dumps(block, indent=1))


@click.command()
@click.option("--device", default="auto", show_default=True, help=DEVICE_HELP)
@click.option("--rel-tol", type=click.FloatRange(0, 10, min_open=True), default=0.2, show_default=True,
              help="Accepted relative difference between timers.")
@click.option("--dtype", "dtypes", multiple=True, type=DtypeChoice(),
              help="Dtypes for the numerical checks; repeatable. Default: all the device runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@domain_errors
def selftest(device: str, rel_tol: float, dtypes: tuple[str, ...], as_json: bool) -> None:
    """Check the tool's timing against torch's Timer (and triton's do_bench),
    graphs against events, the numerics, and the spec lookup.

    Exits non-zero when a check fails; SKIP lines say why a check does not apply.

    \b
    Example:
        mfu-sweep selftest --device cpu
        mfu-sweep selftest --device cuda --rel-tol 0.1
    """
    require_torch("selftest")
    from mfu_sweep.measure.backends import resolve_device
    from mfu_sweep.measure.checks.selftest import format_table, run_selftest

    backend = resolve_device(device)
    info = backend.describe()
    checks = run_selftest(backend, rel_tol=rel_tol, dtypes=dtypes or None)
    if as_json:
        click.echo(json.dumps({"device": info.to_json(label=""), "checks": [c.to_json() for c in checks]}, indent=1))
    else:
        click.echo(f"device: {info.backend} {info.name!r}")
        click.echo(format_table(checks))
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(checks)} checks failed: {', '.join(c.name for c in failed)}")
