"""The KB beyond one machine: a round of sync with the KB's git remote (fetch, replay, push -
never forced), what a round may publish, merging by meaning, and the KBs a home adds from a
remote (team KBs). Below the write path: it takes the write lock it is given and writes files
with git, never through the gateway (docs/adr/0018-packages-by-job.md).

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
