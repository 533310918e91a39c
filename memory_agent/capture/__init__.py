"""Capture: the hook command, what agents' transcripts add to it, the episodes derived from the
journal and the gate that proposes lessons from them. The journal itself, redaction and project
identity are intake's (`memory_agent.intake`), shared with the write path.

Kept free of imports (docs/adr/0013-layout-by-job.md): the hook command imports this package,
and must load the standard library only."""
