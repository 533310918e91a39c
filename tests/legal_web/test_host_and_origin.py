"""The legal web app refuses foreign hosts and cross-origin writes. (Issue 9.)"""

import json


def test_legal_web_refuses_foreign_hosts_and_cross_origin_writes(engine):
    from starlette.testclient import TestClient

    from legal_web.app import create_app

    client = TestClient(create_app(engine), base_url="http://127.0.0.1:8765")
    ask = {"kb": "company-policies", "question": "How many days of leave?"}
    assert client.post("/api/ask", json=ask).status_code == 200
    assert client.get("/api/kbs", headers={"Host": "evil.example:8765"}).status_code == 421
    cross = client.post(
        "/api/ask",
        content=json.dumps(ask),
        headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
    )
    assert cross.status_code == 403
    plain = client.post("/api/ask", content=json.dumps(ask), headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415
