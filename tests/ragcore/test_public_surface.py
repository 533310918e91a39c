"""One public surface of ragcore: the pack and the web app use only its public names, and the index
has no public insides. (Issue 10.)"""

import ast
from pathlib import Path

import ragcore
from ragcore import Index

ROOT = Path(__file__).resolve().parents[2]


# -- one public surface -----------------------------------------------------------------------
# The one reach into another package's insides, on purpose (ADR 0005, addendum): the
# single-exchange path runs the MCP SDK's kernel with the SDK's own server and lifespan state,
# which the SDK does not expose; tests/memory_agent/serve/test_single_exchange.py compares its replies
# with the SDK's byte for byte, so an SDK that changes them fails there. Nothing else.
SDK_REACHES = {
    ("single_exchange.py", "_lowlevel_server"),
    ("single_exchange.py", "_lifespan_state"),
}


def test_the_pack_and_the_web_app_use_only_ragcores_public_names():
    public = set(ragcore.__all__)
    offenders = []
    for folder in ("memory_agent", "legal_web"):
        for path in sorted((ROOT / folder).rglob("*.py")):  # subpackages too
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    if node.module.startswith("ragcore."):
                        offenders.append(f"{path.name}: from {node.module} import ...")
                    elif node.module == "ragcore":
                        offenders += [
                            f"{path.name}: {a.name}" for a in node.names if a.name not in public
                        ]
                elif isinstance(node, ast.Import):
                    offenders += [
                        f"{path.name}: import {a.name}"
                        for a in node.names
                        if a.name.startswith("ragcore.")
                    ]
                elif (
                    isinstance(node, ast.Attribute)
                    and node.attr.startswith("_")
                    and (path.name, node.attr) not in SDK_REACHES
                    and not node.attr.startswith("__")
                    # a named tuple's documented API (`Finding._replace`), not a private name
                    and node.attr not in ("_replace", "_asdict", "_fields", "_make")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    # os._exit is os's documented exit without cleanup (a hook over its budget)
                    and not (isinstance(node.value, ast.Name) and node.value.id == "os")
                    and not (
                        isinstance(node.value, ast.Call)
                        and getattr(node.value.func, "id", "") == "super"
                    )
                ):
                    offenders.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert offenders == []


def test_the_index_has_no_public_insides():
    index_attrs = {n for n in vars(Index) if not n.startswith("_")}
    assert not index_attrs & {"payloads", "bm25", "sparse", "store", "manifest", "lock"}
