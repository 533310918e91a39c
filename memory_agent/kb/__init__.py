"""The knowledge base and its one write path: entries and their files, the gateway with its
checks, dedup, redo log and git, the home; and the memory's policy constants (dedup thresholds,
ranking), which recall reads from here.

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
