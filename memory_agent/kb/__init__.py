"""The knowledge base and its one write path: entries, the gateway, its redo log, git, the home.

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
