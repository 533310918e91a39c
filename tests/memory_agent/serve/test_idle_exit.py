"""A daemon leaves after `idle_exit` seconds without a call (`serve.daemon._idle_watch`), but
never while it builds something no call waits on: a daemon at 1,000,000 entries spent 30
minutes building its dense graph after its first index and then left, idle, with the graph
half built - to start it again at its next start."""

import threading
import time
from types import SimpleNamespace

from memory_agent.serve.daemon import _idle_watch
from memory_agent.serve.service import Service
from ragcore import ann, dense


def test_a_daemon_building_its_dense_graph_is_not_idle(memory, monkeypatch):
    monkeypatch.setattr(ann, "EXACT_BELOW", 1)  # the demo KB's index gets a graph
    monkeypatch.setattr(dense, "EXACT_BELOW", 1)
    release = threading.Event()
    real = ann.build_graph
    monkeypatch.setattr(ann, "build_graph", lambda *a, **k: release.wait(60) and real(*a, **k))
    builds = []  # the rows of each build started (more than one: the index was opened again)
    started = ann.build_in_background
    monkeypatch.setattr(
        ann, "build_in_background", lambda m, *a: builds.append(m.base_rows.shape) or started(m, *a)
    )
    memory.resident = True
    service = Service(memory)
    server = SimpleNamespace(should_exit=False)
    try:
        service.model.wait()
        service.search(query="how do I run the tests")  # opens the index: the build starts
        assert memory.dense_state() == "building" and service.busy() == "the dense graph"
        watch = threading.Thread(target=_idle_watch, args=(service, {"server": server}, 0.3))
        watch.start()
        time.sleep(1.5)  # five idle windows
        assert server.should_exit is False
        release.set()
        deadline = time.monotonic() + 30
        while memory.dense_state() == "building" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.dense_state() == "graph" and service.busy() is None, builds
        watch.join(10)
        assert server.should_exit is True  # idle once the work is done
    finally:
        release.set()
        server.should_exit = True
        service.events.close()
