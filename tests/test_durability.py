"""Acknowledged writes are durable, IDs and cursors survive restarts: the real server process."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.servers import ProcessServer


def test_ids_and_cursors_survive_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "restart.db")
    with ProcessServer(db) as server, httpx.Client(base_url=server.url, timeout=30) as api:
        trigger = api.post(
            "/triggers",
            json={"source": "chat", "kind": "message", "thread_key": "c:1", "payload": "before"},
        ).json()
        before = api.get(f"/triggers/{trigger['id']}").json()
        cursor = api.get(f"/threads/{trigger['thread_id']}/events").json()["next_cursor"]
    with ProcessServer(db) as server, httpx.Client(base_url=server.url, timeout=30) as api:
        assert api.get(f"/triggers/{trigger['id']}").json() == before
        new = api.post(
            "/triggers",
            json={"source": "chat", "kind": "message", "thread_key": "c:1", "payload": "after"},
        ).json()
        page = api.get(f"/threads/{trigger['thread_id']}/events", params={"cursor": cursor})
        assert page.status_code == 200
        assert [e["id"] for e in page.json()["items"]] == [new["id"]]


def test_a_server_killed_right_after_acknowledging_loses_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "kill.db")
    acknowledged: list[dict[str, str]] = []
    server = ProcessServer(db).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as api:
            for i in range(40):
                response = api.post(
                    "/triggers",
                    json={
                        "source": "ci", "kind": "run", "thread_key": f"ci:{i % 3}",
                        "payload": {"run": i}, "dedupe_key": f"run-{i}",
                    },
                )  # fmt: skip
                assert response.status_code == 201
                acknowledged.append(response.json())
            worker = api.post(
                "/workers", json={"thread_id": acknowledged[0]["thread_id"], "task": "triage"}
            ).json()
            api.post(
                f"/workers/{worker['id']}/report",
                json={"summary": "triaged", "refs": [acknowledged[0]["id"]], "status": "ready"},
            ).raise_for_status()
        server.kill()  # SIGKILL straight after the last acknowledgement
    finally:
        server.stop()
    with ProcessServer(db) as again, httpx.Client(base_url=again.url, timeout=30) as api:
        for record in acknowledged:
            stored = api.get(f"/triggers/{record['id']}").json()
            # `neighbours.next` fills in as later triggers arrive; everything else is as acked
            assert stored["neighbours"]["prev"] == record["neighbours"]["prev"]
            stored.pop("neighbours"), record.pop("neighbours")
            assert stored == record
            assert api.get(f"/triggers/{record['id']}/payload").json() == {
                "run": int(record["dedupe_key"].split("-")[1])
            }
        assert api.get(f"/workers/{worker['id']}").json()["report"]["summary"] == "triaged"
