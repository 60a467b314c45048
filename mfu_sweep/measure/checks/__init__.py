"""Checks of a device apart from the sweep loop: measured ceilings (copy bandwidth, best GEMM TFLOP/s) and
the self-checks of the tool's timing against torch's Timer.

May import: the ground and the rest of ``measure/`` (backends, bench, timing, sweep); never ``analysis/``,
``present/``, ``workflow/``, ``cli/``, matplotlib or Click.
"""
