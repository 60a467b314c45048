"""mfu-sweep: GEMM throughput and MFU sweeps across accelerators.

Library first: everything the CLI does is importable. The command line's tables as pandas DataFrames are in
:mod:`mfu_sweep.api`::

    from mfu_sweep import api
    bands = api.bands(["sweeps/published/sm_100_B200.json", "sweeps/published/gfx950.json"], metric="tflops")
"""

# The one version source: pyproject.toml reads it (tool.setuptools.dynamic), so the metadata, `mfu-sweep
# --version` and every file's tool.version agree.
__version__ = "0.1.0"
