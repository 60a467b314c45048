"""Measurement: running GEMMs on a device and recording what happened.

Planning and checkpoints (``sweep``), the worker subprocess (``worker``), one task and one shape
(``task``, ``bench``), the device-agnostic adaptive timer (``timing``), measured ceilings, self-checks,
torchrun/Slurm placement (``distributed``) and one backend per device stack (``backends/``). Never
imports the analysis, the figures or Click (``tests/test_layout.py``).

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and itself (torch inside the worker and the
run processes); never ``analysis/``, ``present/``, ``workflow/``, ``cli/``, matplotlib or Click.
"""
