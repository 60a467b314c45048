"""Where to measure next: shapes and passes that most narrow what a comparison leaves open, and where one
device's curve bends. Deciding only; ``workflow/loop.py`` runs the loop and ``cli/refine.py`` is the command.

Imports every other part of ``analysis/`` except ``predict``.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and every other part of ``analysis/``; no
torch, matplotlib or Click.
"""
