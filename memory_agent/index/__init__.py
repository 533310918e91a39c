"""The index side: one home's state, the scans that keep the index in line with the files,
the file watcher and the read-only corpora.

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
