"""What the daemon takes from the MCP SDK beyond its public surface, named: pyproject bounds
`mcp` to the versions tested, and this test fails - saying which attribute and where - if a
release moves one, before any reply goes wrong."""

from __future__ import annotations

import ast
import inspect
from importlib.metadata import version

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from memory_agent.serve import single_exchange
from memory_agent.serve.daemon import build_app
from memory_agent.serve.service import Service


def test_the_one_private_sdk_attribute_the_daemon_reads_still_exists(memory):
    name = single_exchange.PRIVATE_LIFESPAN_STATE
    assert name == "_lifespan_state"
    init = inspect.getsource(StreamableHTTPSessionManager.__init__)
    assert f"self.{name}" in init, (
        f"mcp {version('mcp')}: StreamableHTTPSessionManager no longer sets {name}, which "
        "memory_agent/serve/single_exchange.py reads to hand a read-only call the lifespan "
        "state the SDK gives every request; keep mcp within the tested versions (pyproject) or "
        "find the new place of that state"
    )
    service = Service(memory)
    try:
        app = build_app(service, {})
        assert isinstance(app, single_exchange.SingleExchangeReads)
        manager = app.mcp.session_manager
        assert hasattr(manager, name), f"mcp {version('mcp')}: {name} is gone"
        # the public way to the low-level server the session manager drives (no private
        # `MCPServer._lowlevel_server`)
        assert manager.app.name == app.mcp.name
    finally:
        service.events.close()


def test_single_exchange_reads_no_other_private_name_of_the_sdk():
    """Every `x._name` in the module's code is our own (`self._...`): the SDK's one private
    attribute is reached by its name above, through `getattr`."""
    tree = ast.parse(inspect.getsource(single_exchange))
    foreign = sorted(
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    )
    assert foreign == [], foreign
