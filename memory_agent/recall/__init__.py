"""Recall: search, get and history, the ranking with the memory's dynamics, the usage events
that feed it, the garbage report and the recall injected before a prompt.

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
