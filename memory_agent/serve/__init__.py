"""Serving agents: the resident daemon, the service behind its tools, the MCP tool definitions
and their schemas, and what connects an agent to it (settings, hooks, a stdio session).

Kept free of imports (docs/adr/0013-layout-by-job.md): importing a module of this package
loads nothing else."""
