"""The write path: the gateway (the only way an entry is written), the checks it runs before
anything is written, dedup, its redo log, and import of what people already wrote. Above the
index, which it refreshes after each write (docs/adr/0018-packages-by-job.md).

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
