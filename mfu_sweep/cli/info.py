"""``mfu-sweep specs`` and ``mfu-sweep validate``: the peak table and the result-file check."""

from __future__ import annotations

import json
from typing import Any

import click

from mfu_sweep.cli.common import domain_errors, require_torch, spec_file_option
from mfu_sweep.util.text import counted


@click.command()
@click.option("--detect", is_flag=True, help="Show which entry this machine's devices map to.")
@click.option("--device", default="auto", show_default=True, help="Device to detect (with --detect).")
@spec_file_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@domain_errors
def specs(detect: bool, device: str, spec_file: str | None, as_json: bool) -> None:
    """List the peak-spec table (dense TFLOP/s, memory, sources).

    \b
    Example:
        mfu-sweep specs
        mfu-sweep specs --detect
    """
    from mfu_sweep.specs import load_chips

    chips = load_chips(spec_file)
    if detect:
        require_torch("specs --detect")
        from mfu_sweep.measure.worker import hello

        _, info = hello(device, spec_file, None)
        if as_json:
            click.echo(json.dumps(info, indent=1))
            return
        d, p = info["device"], info["peak"]
        click.echo(f"device:  {d['backend']} {d['name']!r} -> chip {d.get('chip')!r}")
        kind = "estimated" if p["estimated"] else "vendor spec"
        peaks = ", ".join(f"{k} {v:.4g}" for k, v in p["tflops"].items())
        click.echo(f"peak ({kind}, TFLOP/s): {peaks or 'none'}")
        click.echo(f"source:  {p['source']}")
        _detect_identity(d)
        return
    if as_json:
        click.echo(json.dumps([c.to_json() for c in chips.values()], indent=1))
        return
    cols = ["fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "nvfp4"]
    click.echo(f"{'id':<11} {'scope':<5} " + " ".join(f"{c:>7}" for c in cols) + f" {'GB':>5} {'TB/s':>6}  source")
    for c in chips.values():
        vals = " ".join(f"{c.peak_tflops[d]:>7.6g}" if d in c.peak_tflops else f"{'-':>7}" for d in cols)
        click.echo(f"{c.id:<11} {c.scope:<5} {vals} {c.memory_gb or 0:>5.0f} {c.memory_bandwidth_tbs or 0:>6.3g}  "
                   f"{c.source_url}" + (f"  [{c.source_kind}]" if c.source_kind != "vendor" else ""))
    click.echo("All figures dense (no sparsity); fp8-rowwise is measured against the fp8 figure. Notes on disputed "
               "values: mfu-sweep specs --json")
    _block_scaled_sources(chips.values())


def _block_scaled_sources(chips: Any) -> None:
    """One line per block-scaled peak: chip, dtype, TFLOP/s, which figure of which source it is."""
    lines = [f"  {c.id:<11} {d:<6} {c.peak_tflops[d]:>7.6g}  {c.peak_sources[d]}; {c.source_title} <{c.source_url}>"
             for c in chips for d in sorted(c.peak_sources)]
    if lines:
        click.echo("\nBlock-scaled peaks (TFLOP/s) and their sources:")
        click.echo("\n".join(lines))


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: per file whether it is valid, every problem, its sweeps and records, and why a "
                   "sweep is incomplete (the exit status is the same).")
def validate(files: tuple[str, ...], as_json: bool) -> None:
    """Check result files: the shipped JSON Schema and what the numbers mean, and say which sweeps are incomplete.

    Beyond the schema: every number finite; flops, bytes and intensity those
    of the record's shape and dtype; median_s among the samples; tflops and
    mfu those of median_s and the sweep's peak; one record per (pass, shape,
    dtype, mode) and, in a merged file, one sweep per run.id; no JSON key
    twice in an object; size and nesting within the input limits
    (MFU_SWEEP_MAX_INPUT_MB). Every command that reads result files refuses
    a file that fails (or, with --allow-invalid, drops the records that fail,
    with a note). An incomplete sweep (interrupted, or still running) is
    valid and says so; continue it with `mfu-sweep sweep --resume -o FILE`.
    A step file (`mfu-sweep steps`) is checked too (first and steady steps
    those of its step times, one run per mode, cache and repeat) and summed
    up in one line: its runs by status.

    \b
    Example:
        mfu-sweep validate sweeps/*.json
        mfu-sweep validate sweeps/*.json --json
    """
    from mfu_sweep.records.results import check_file
    from mfu_sweep.records.summaries import incomplete_reason

    bad = 0
    found = []
    for f in files:
        problems, sweeps = check_file(f)
        unfinished = [r.removeprefix(f + ": ") for r in map(incomplete_reason, sweeps) if r]
        found.append({"file": f, "valid": not problems, "problems": problems, "sweeps": len(sweeps),
                      "records": sum(len(s.records) for s in sweeps), "incomplete": unfinished})
        if problems:
            bad += 1
            more = f" (and {counted(len(problems) - 1, 'more problem')})" if len(problems) > 1 else ""
            if not as_json:
                click.echo(f"{f}: INVALID: {problems[0]}{more}")
            continue
        if not sweeps:  # a valid step file (`mfu-sweep steps`): its one-line summary
            from mfu_sweep.records.step_files import load_step_file, summary_line

            line = summary_line(load_step_file(f))
            found[-1]["steps"] = line
            if not as_json:
                click.echo(f"{f}: ok, {line}")
            continue
        if not as_json:
            click.echo(f"{f}: ok" + (f", but {unfinished[0]}" if unfinished else ""))
    if as_json:
        click.echo(json.dumps({"files": found, "invalid": bad}, indent=1))
    if bad:
        raise click.ClickException(f"{bad} of {len(files)} files invalid")


def _detect_identity(d: dict) -> None:
    """The CPU table row with its FLOP/cycle and citations, and the device fingerprint."""
    if d["backend"] == "cpu":
        from mfu_sweep.specs.cpu import citations, flop_per_cycle, load_cpuinfo

        rates = flop_per_cycle(load_cpuinfo())
        per = ", ".join(f"{k} {v}" for k, v in rates.per_cycle.items())
        click.echo(f"FLOP/cycle per physical core: {per}; from {rates.rule}")
        for sentence in rates.flags_decide:  # a model number the flags contradict (a KVM guest)
            click.echo(f"  flags decide: {sentence}")
        for cite in citations(rates.uarch) if rates.uarch else ():
            click.echo(f"  cited: {cite}")
    if d.get("fingerprint"):
        from mfu_sweep.measure.sweep import default_label
        from mfu_sweep.records.fingerprint import describe

        click.echo(f"fingerprint: {describe(d)}; default label {default_label(d)}")
