"""memory-agent: long-term memory for coding agents, on the ragcore retrieval core."""

__version__ = "0.1.0"
