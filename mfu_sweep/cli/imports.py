"""``mfu-sweep import``: published and third-party GEMM results as v1 sweeps.

Registered on the main group by :mod:`mfu_sweep.cli`. All reading
and checking happens in :mod:`mfu_sweep.importers`; this module parses options,
refuses to overwrite, holds each output's one-writer lock (``mfu_sweep.util.filelock``), writes
atomically and prints.
"""

from __future__ import annotations

import glob
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from mfu_sweep.cli.common import domain_errors, dtype_aliases, invoked_argv, spec_file_option
from mfu_sweep.importers import FORMATS, import_sources
from mfu_sweep.importers.common import SourceError, parse_pairs
from mfu_sweep.importers.pieces import split_for_limit
from mfu_sweep.records.results import ResultError, read_json, save_sweep
from mfu_sweep.records.summaries import summary_line
from mfu_sweep.specs import load_chips
from mfu_sweep.util.filelock import output_lock
from mfu_sweep.util.inputs import MAX_MB_ENV, STDIN, max_input_bytes
from mfu_sweep.util.names import check_distinct_names, safe_name
from mfu_sweep.util.outputs import check_output_dir
from mfu_sweep.util.text import counted


def _source_of(path: Path) -> tuple[str | None, str]:
    """The ``source_sha256`` and source file name of an existing output (None: not an import, or unreadable)."""
    try:
        block = read_json(path).get("import") or {}
    except (ResultError, AttributeError):
        return None, "?"
    return block.get("source_sha256"), str(block.get("source_file") or "?")


def _exists_message(existing: Sequence[str], targets: Mapping[str, Path], sweeps: Mapping[str, Any]) -> str:
    """Why an existing output stops the import, and the fix: ``--force`` only when it came from the same source;
    from another table ``--force`` would replace another source's data, so ``--label`` or ``--only``."""
    label = existing[0]
    path, sweep = targets[label], sweeps[label]
    old_sha, old_file = _source_of(path)
    if old_sha is None or old_sha == (sweep.extra.get("import") or {}).get("source_sha256"):
        return f"output {str(path)!r} exists; pass --force to overwrite"
    name = sweep.device.get("name", label)
    others = [lbl for lbl in targets if lbl not in existing]
    only = f", or import only the others with --only {' --only '.join(others)}" if others else ""
    more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
    return (f"output {str(path)!r}{more} holds {label} imported from another source ({old_file}); --force would "
            f"replace it: import beside it with --label {name}=NEW_NAME{only}")


def _piece_path(target: Path, index: int) -> Path:
    """Piece ``index`` (from 1) of an import split for the input limit: the target itself, then
    ``<target>.part<index>.json``."""
    return target if index == 1 else target.with_name(f"{target.stem}.part{index}.json")


def _piece_files(target: Path) -> list[Path]:
    """Pieces 2 and up of an earlier split import to ``target``."""
    return sorted(target.parent.glob(f"{glob.escape(target.stem)}.part[0-9]*.json"))


def _save_pieces(target: Path, pieces: Sequence[Any]) -> None:
    """Write an import whole, or as pieces (removing the pieces of an earlier, larger split); say so."""
    for i, piece in enumerate(pieces, start=1):
        save_sweep(_piece_path(target, i), piece)
    for stale in _piece_files(target)[len(pieces) - 1:]:
        stale.unlink()
    if len(pieces) > 1:
        total = pieces[0].extra["import"]["piece"]["records"]
        more = counted(len(pieces) - 1, "more piece")
        click.echo(f"note: {target.name} and {more} ({target.stem}.part2.json ...): one import of {total} records,"
                   f" split to stay within the input limit of {max_input_bytes() / 2**20:.4g} MiB "
                   f"({MAX_MB_ENV}); read them together, e.g. {target.parent}/{target.stem}*.json", err=True)


@click.command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("-o", "--output-dir", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the sweeps, one DIR/<label>.json per device found.")
@click.option("--chip", "chips", multiple=True, metavar="[FILE:]SRC=ID",
              help="Map a source device (as the source names it, e.g. sm_90 or NV_P100) to a spec entry; "
                   "FILE:SRC=ID for that device of one file only.")
@click.option("--label", "labels", multiple=True, metavar="[FILE:]SRC=NAME",
              help="Output label for a source device (default: the source's own name); FILE:SRC=NAME names the "
                   "device of one file (FILE as given or its file name), which resolves two files naming one device.")
@click.option("--only", multiple=True, metavar="[FILE:]SRC", help="Import only this source device (repeatable).")
@click.option("--dtype", default=None, callback=dtype_aliases,
              help="nvbench and mamf-finder: the dtype when the source names none (no dtype axis; a pasted summary); "
                   "tritonbench: required (its files never name the --precision they ran).")
@click.option("--axis", "axes", multiple=True, metavar="DIM=NAME",
              help="nvbench only: the source axis that is M, N, K, B (batch) or T (dtype), e.g. --axis 'K=Num Cols'.")
@spec_file_option
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: per file written its label, source device, chip, record count by status, and the "
                   "warnings.")
@domain_errors
def import_(fmt: str, sources: tuple[str, ...], output_dir: str, chips: tuple[str, ...], labels: tuple[str, ...],
            only: tuple[str, ...], dtype: str | None, axes: tuple[str, ...], spec_file: str | None,
            force: bool, as_json: bool) -> None:
    """Import published GEMM results (another team's measurements) as v1 sweeps.

    FORMAT is xla-perf-table (OpenXLA default_matmul_perf_table.txtpb), deepbench
    (DeepBench results/*.xlsx), mamf-finder (a log of any version since 2024, or a
    pasted summary), nvbench (--json, --csv or --md output) or tritonbench (a GEMM
    operator's --csv/--output table or --output-json; one device per backend
    column). A file of another tool (pyperf, Google Benchmark, a sweep) is refused,
    naming what it looks like and what reads it. Every record keeps
    the value the source gives (samples_s of length 1 unless the source has
    samples), is flagged `imported`, and carries its timing method in `timer`,
    `cache` and `mode`; the file's `import` block says where the numbers come from
    and how they were timed. Nothing is written if any source is bad; a cut log is
    imported with every record flagged `truncated` and the skipped lines counted.

    \b
    Example:
        mfu-sweep import xla-perf-table data/published/xla/openxla-main/default_matmul_perf_table.txtpb -o out/
        mfu-sweep import xla-perf-table data/published/xla/rocm-sol/default_matmul_perf_table.txtpb --only gfx942 \\
            --chip gfx942=mi325x -o out/
        mfu-sweep import deepbench data/published/deepbench/DeepBench_NV_P100.xlsx -o out/
        mfu-sweep import mamf-finder tests/data/import/mamf_finder_shisa_gpu0_bf16_excerpt.txt -o out/
        mfu-sweep import tritonbench gemm.csv --dtype bf16 --chip tritonbench=h100-sxm -o out/
        mfu-sweep import nvbench results.json -o out/ --json
    """
    if STDIN in sources:
        raise SourceError("import reads each SOURCE by name (its file name and SHA-256 are the imported file's "
                          "provenance, and a provenance.toml beside it is read): save standard input to a file "
                          "and give its name, not -")
    result = import_sources(
        fmt, sources, chip_overrides=parse_pairs(chips, "--chip"), labels=parse_pairs(labels, "--label"),
        dtype=dtype, chips=load_chips(spec_file), argv=invoked_argv(), only=only, axes=parse_pairs(axes, "--axis"),
    )
    out = check_output_dir(output_dir, force=True)  # after the sources parsed: a bad one leaves no directory
    check_distinct_names(result.sweeps, "output file", "give each its own name with --label")
    targets = {label: out / f"{safe_name(label)}.json" for label in result.sweeps}  # inside -o, whatever the label
    pieces = {label: split_for_limit(sweep, max_input_bytes()) for label, sweep in result.sweeps.items()}
    with ExitStack() as held:  # every output's one-writer lock, before any is checked or written
        for target in targets.values():
            note = held.enter_context(output_lock(target)).note
            if note:
                click.echo(f"note: {note}", err=True)
        existing = [label for label, p in targets.items() if p.exists() or _piece_files(p)]
        if existing and not force:
            raise SourceError(_exists_message(existing, targets, result.sweeps))
        for w in () if as_json else result.warnings:
            click.echo(f"warning: {w}", err=True)
        for label, sweep in result.sweeps.items():
            _save_pieces(targets[label], pieces[label])
            if not as_json:
                click.echo(f"{targets[label]}: {sweep.device['name']} -> {sweep.peak.chip or 'no spec entry'}; "
                           f"{summary_line(sweep.records)}")
    if as_json:
        written = [_written(targets[lbl], sw) for lbl, sw in result.sweeps.items()]
        click.echo(json.dumps({"format": fmt, "files": written, "warnings": list(result.warnings)}, indent=1))


def _written(path: Path, sweep: Any) -> dict[str, Any]:
    """What ``import --json`` says of one file written."""
    status = Counter(r.status for r in sweep.records)
    return {"file": str(path), "label": sweep.label, "device": sweep.device.get("name"), "chip": sweep.peak.chip,
            "records": len(sweep.records), "status": dict(sorted(status.items())),
            "summary": summary_line(sweep.records)}
