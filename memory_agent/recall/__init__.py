"""Recall: search, get and history, the ranking with the memory's dynamics, the usage events
that feed it, the garbage report, the recall injected before a prompt, and the ranking policy
(`recall.policy`: every constant of how it ranks).

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
