"""An import too large for one file: split into pieces that the tool's own readers accept.

Every reader refuses a file over the input limit (:func:`mfu_sweep.util.inputs.max_input_bytes`, 256 MiB unless
``MFU_SWEEP_MAX_INPUT_MB`` says otherwise): OpenXLA's table of 300,000 entries imported as one 269 MiB file
that ``validate`` then refused. :func:`split_for_limit` cuts such a sweep's records into consecutive pieces,
each a whole sweep of the same device, run and import block that stays within :data:`PIECE_FILL` of the
limit; the pieces pool back into one series (same label, device, peak and run), and each says which piece it
is (``import.piece``: index from 1, count, and the records of the whole import) and carries a note.

Imports only the ground.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from mfu_sweep.records.results import Sweep
from mfu_sweep.util import jsonio

PIECE_FILL = 0.9  # of the input limit: room for a reader's own limit rounding and a later field or two


def encoded_size(sweep: Sweep) -> int:
    """Bytes of ``sweep`` as the tool writes it (``write_json_atomic``: indented JSON and a newline)."""
    return len(jsonio.dumps(sweep.to_json(), indent=True)) + 1


def _piece(sweep: Sweep, index: int, count: int, records: Any) -> Sweep:
    block = dict(sweep.extra.get("import") or {})
    total = len(sweep.records)
    block["piece"] = {"index": index, "count": count, "records": total}
    note = (f"piece {index} of {count} of one import of {total} records, split so that each file stays within "
            "the input limit; the pieces pool into one series")
    block["notes"] = [*list(block.get("notes") or []), note]
    return replace(sweep, records=tuple(records), extra={**sweep.extra, "import": block})


def split_for_limit(sweep: Sweep, limit: int) -> list[Sweep]:
    """``[sweep]`` when it fits in ``limit`` bytes written, else its pieces (see the module docstring), as few
    as fit."""
    size = encoded_size(sweep)
    if size <= limit:
        return [sweep]
    count = max(2, math.ceil(size / (PIECE_FILL * limit)))
    while True:
        step = math.ceil(len(sweep.records) / count)
        pieces = [_piece(sweep, i + 1, count, sweep.records[a:a + step])
                  for i, a in enumerate(range(0, len(sweep.records), step))]
        if len(pieces) == count and all(encoded_size(p) <= limit for p in pieces):
            return pieces
        if step <= 1:
            raise ValueError(f"one record of {sweep.label} is larger than the input limit of {limit} bytes")
        count += 1
