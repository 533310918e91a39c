"""The knowledge base on disk: the entry format and its files, git plumbing, the home's
folders, the KBs of a home and the scopes entries are written into. The bottom of the pack:
it imports nothing of index, recall, write, sync, capture or serve (tests/test_layout.py).

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
