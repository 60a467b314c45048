"""A real model's steps (``mfu-sweep steps``): the plan and loop of fresh-process runs into a step file (loop),
the ``--model`` and ``--dtype`` read at the edge (spec), the models (models), one run process from the
parent's side (proc), the run process itself (run) and its statistics (stats).

May import: the ground (``records/`` for the step file) and the rest of ``measure/``; never ``analysis/``,
``present/``, ``workflow/``, ``cli/``, matplotlib or Click.
"""
