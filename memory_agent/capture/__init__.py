"""Capture: the hook command, the redacted journal of agent turns, the episodes derived from
it and the gate that proposes lessons from them.

Kept free of imports (docs/adr/0013-layout-by-job.md): the hook command imports this package,
and must load the standard library only."""
