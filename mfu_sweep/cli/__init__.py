"""The ``mfu-sweep`` command line: parses options, calls the library, prints.

One module per command group; this module only builds the group. Every command
validates its input at the edge and turns domain errors into one-line messages
with a non-zero exit (``click.ClickException``), never a traceback. Nothing
outside this package imports it (or Click).

May import: every package (the ground and every stage); nothing imports it. No torch in this process: the device
runs in a worker.
"""

from __future__ import annotations

import click

from mfu_sweep import __version__
from mfu_sweep.cli.analysis import compare, fit, merge
from mfu_sweep.cli.common import ArgvGroup
from mfu_sweep.cli.device import ceilings, selftest
from mfu_sweep.cli.docs import docs
from mfu_sweep.cli.export import export
from mfu_sweep.cli.imports import import_
from mfu_sweep.cli.info import specs, validate
from mfu_sweep.cli.measure_steps import steps
from mfu_sweep.cli.refine import refine
from mfu_sweep.cli.repair import repair
from mfu_sweep.cli.report import plot, report
from mfu_sweep.cli.sweep import sweep
from mfu_sweep.cli.workloads import predict, shapes


@click.group(cls=ArgvGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mfu-sweep")
def main() -> None:
    """Sweep GEMM shapes on a device, compute MFU against cited peak specs,
    fit rooflines and find where each chip leads.

    \b
    Example:
        mfu-sweep sweep --device cpu --dtype fp32 -o out/my-cpu.json
        mfu-sweep report out/my-cpu.json -o out/report/
        mfu-sweep validate sweeps/*.json

    Every command has --help with examples; `mfu-sweep docs` lists the documentation pages installed with
    the package and prints any of them (`mfu-sweep docs api`: the Python API).
    """


for _command in (sweep, steps, specs, validate, repair, shapes, predict, ceilings, selftest, merge, fit, compare,
                 export, plot, report, import_, refine, docs):
    main.add_command(_command)
