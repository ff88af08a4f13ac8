"""A real keyed SynapseDB server on loopback with a seeded namespace, and Debian's chromium
driven by Playwright (never downloaded: ``executable_path``), for the console's tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import synapsedb
from synapsedb import Database
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.support.live_server import serve

CHROMIUM = Path("/usr/bin/chromium")
NS = "support"


@dataclass
class ConsoleEnv:
    url: str
    db: Database
    tokens: dict[str, str]
    seeded: dict[str, Any] = field(default_factory=dict)

    def call(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}", **kw.pop("headers", {})}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kw)

    def ns(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        return self.call(method, f"/v1/namespaces/{NS}{path}", who, **kw)


def seed(env: ConsoleEnv) -> None:
    """Three agents share memory about user:4321; an answer is built on a memory that is
    corrected after ``before``."""

    def ok(resp: httpx.Response) -> Any:
        assert resp.status_code < 300, resp.text
        return resp.json()

    refund = ok(
        env.ns(
            "POST",
            "/memories",
            json={
                "entity": "user:4321",
                "content": "Refund for order #1458 is pending",
                "type": "fact",
            },
            headers={"X-Agent": "intake"},
        )
    )
    ok(
        env.ns(
            "POST",
            "/memories",
            json={
                "entity": "user:4321",
                "content": "Prefers email over phone calls",
                "type": "preference",
            },
            headers={"X-Agent": "knowledge"},
        )
    )
    ok(
        env.ns(
            "PUT",
            "/facts",
            json={"entity": "user:4321", "key": "plan", "value": "pro"},
            headers={"X-Agent": "intake"},
        )
    )
    ok(
        env.ns(
            "POST",
            "/events",
            json={"entity": "user:4321", "event": "opened ticket 77"},
            headers={"X-Agent": "intake"},
        )
    )
    ok(
        env.ns(
            "POST",
            "/memories:batch",
            json={
                "items": [  # more than a page of entities
                    {"entity": f"user:{1000 + i}", "content": f"customer {i} bought a kettle"}
                    for i in range(60)
                ]
            },
        )
    )
    ok(
        env.ns(
            "POST",
            "/memories",
            json={
                "entity": "user:4321",
                "content": "prefers emails over phone calls",
                "type": "preference",
            },
            headers={"X-Agent": "intake"},
        )
    )  # a near-duplicate (cosine 0.987): a dedup group
    q = ok(
        env.ns(
            "POST",
            "/query",
            json={"text": "refund status for order 1458", "k": 3, "entity": "user:4321"},
            headers={"X-Agent": "knowledge"},
        )
    )
    ok(
        env.ns(
            "POST",
            "/answers",
            json={
                "answer_id": "ans-771",
                "query_ids": [q["query_id"]],
                "text": "Your refund is pending.",
                "cited": [refund["id"]],
            },
            headers={"X-Agent": "resolution"},
        )
    )
    time.sleep(0.05)  # the time slider's "before": strictly between the two versions
    before = time.time()
    time.sleep(0.05)
    ok(
        env.ns(
            "PATCH",
            f"/memories/{refund['id']}",
            json={"changes": {"content": "Refund for order #1458 was delivered on 10/28"}},
            headers={"X-Agent": "resolution"},
        )
    )
    env.seeded.update(refund=refund["id"], before=before)


@pytest.fixture(scope="module")
def console_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleEnv]:
    path = tmp_path_factory.mktemp("console") / "d"
    db = synapsedb.open(path, durability="os", background_maintenance=False)
    keys = KeyStore(path)
    tokens = {
        name: keys.create("acme", scopes)[1]
        for name, scopes in [
            ("admin", ["read", "write", "admin"]),
            ("writer", ["read", "write"]),
            ("reader", ["read"]),
        ]
    }
    _, tokens["other"] = keys.create("globex", ["read", "write", "admin"])
    try:
        with serve(create_app(db, keys)) as url:
            env = ConsoleEnv(url, db, tokens)
            seed(env)
            yield env
    finally:
        db.close()
