"""The result files: what a sweep or step file holds and how it is read, checked, journalled and saved.

Decides the format (one ``SCHEMA_VERSION``), what ``validate`` and every reader check, the journal of a
running sweep, views of records (summaries, shards, contention), device fingerprints, other tools' files
given to the wrong command, and the step files of ``mfu-sweep steps``.
May import: ``util/``, ``gemm/``, ``specs/`` and itself; never a stage (measure, importers, analysis,
present, workflow, cli), torch, matplotlib or Click.
"""
