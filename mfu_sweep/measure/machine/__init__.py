"""Readings of the machine a measurement runs on: others' and steal share of the worker's cores (cores),
the CPU clock and FMA ceilings (clockprobe), other compute processes on the GPU (gpu_neighbours), the
sweep's eye on all of them (watch), throttling (throttle), energy counters (energy) and the memory free to
a shape (memory).

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and the rest of ``measure/``; never
``analysis/``, ``present/``, ``workflow/``, ``cli/``, matplotlib or Click.
"""
