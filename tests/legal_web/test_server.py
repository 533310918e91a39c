"""Smoke test: legal_web as a real process on a real port."""

import json
import signal
import urllib.error
import urllib.request

import pytest

from legal_web.engine import default_data_dir
from tests.legal_web.server_helpers import WebProcess


def get(url):
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, resp.headers.get("content-type", ""), resp.read()


def post(url, payload):
    req = urllib.request.Request(
        url,
        json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_serves_answers_stops_cleanly_and_restarts_on_the_same_port(tmp_path, shared_cache):
    web = WebProcess(tmp_path / "home", shared_cache)
    try:
        assert web.ready_s < 120
        status, ctype, body = get(web.url + "/")
        assert status == 200 and "text/html" in ctype and "法规问答".encode() in body
        for asset in ("/static/app.js", "/static/app.css"):
            assert get(web.url + asset)[0] == 200
        assert json.loads(get(web.url + "/healthz")[2])["status"] == "ok"
        kbs = {kb["name"]: kb["docs"] for kb in json.loads(get(web.url + "/api/kbs")[2])}
        expected = {
            d.name: len(list(d.glob("*.md")))
            for d in default_data_dir().iterdir()
            if (d / "_kb.json").is_file()
        }
        assert kbs == expected and sum(kbs.values()) >= 30
        status, reply = post(
            web.url + "/api/ask",
            {"kb": "company-policies", "question": "Can I claim a taxi home after working late?"},
        )
        assert status == 200 and reply["answer"]
        top3 = [p["doc"] for p in reply["passages"][:3]]
        assert "expense-reimbursement.md" in top3, top3
        assert set(reply["passages"][0]) == {"doc", "title", "heading", "snippet", "score"}
        assert post(web.url + "/api/ask", {"kb": "nope", "question": "x"})[0] == 404
        assert post(web.url + "/api/ask", {"kb": ["company-policies"], "question": "x"})[0] == 400
        assert post(web.url + "/api/ask", {"kb": "company-policies", "question": " "})[0] == 400
        # a second instance on the same home is refused: two never share an index
        with pytest.raises(RuntimeError, match="another instance"):
            WebProcess(tmp_path / "home", shared_cache)
    finally:
        code = web.stop()
    assert code == 0
    # port and lock released: the same port and the same home work again at once
    again = WebProcess(tmp_path / "home", shared_cache, port=web.port)
    try:
        assert again.port == web.port
        assert get(again.url + "/healthz")[0] == 200
    finally:
        again.proc.send_signal(signal.SIGINT)
        assert again.proc.wait(timeout=60) == 0
