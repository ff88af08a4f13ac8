"""A memory proxy to test against: a real SynapseDB server on loopback (two tenants' keys)
whose upstream model is ScriptedUpstream, a stand-in for a hosted model that records what it
was sent. Used by the ``proxy`` fixture of tests/api/conftest.py."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

import synapsedb
from synapsedb import Database
from synapsedb.config import LLMSettings
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from tests.support.live_server import serve
from tests.support.scripted_upstream import ScriptedUpstream

__all__ = ["UPSTREAM_KEY", "ProxyEnv", "injected", "start_proxy"]

UPSTREAM_KEY = "sk-upstream-0123456789abcdef"  # what the server sends its upstream


@dataclass
class ProxyEnv:
    url: str
    upstream: ScriptedUpstream
    db: Database
    app: Any
    tokens: dict[str, str]

    def auth(self, who: str = "a") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def sdk(self, who: str = "a", ns: str | None = "acme") -> openai.OpenAI:
        """The official client, unmodified: only its base URL points at SynapseDB."""
        base = f"{self.url}/v1/namespaces/{ns}" if ns else f"{self.url}/v1"
        return openai.OpenAI(base_url=base, api_key=self.tokens[who], max_retries=0, timeout=30)

    def call(
        self, method: str, path: str, who: str = "a", ns: str = "acme", **kw: Any
    ) -> httpx.Response:
        return httpx.request(
            method, f"{self.url}/v1/namespaces/{ns}{path}", headers=self.auth(who), timeout=30, **kw
        )

    def seed(self, entity: str, content: str, who: str = "a", ns: str = "acme") -> str:
        r = self.call("POST", "/memories", who, ns, json={"entity": entity, "content": content})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def drain(self) -> None:
        """Wait for the proxy's background work (record_answer, remember) queued so far."""
        self.app.state.proxy.drain()

    def wait_for_memory(
        self, entity: str, content: str, who: str = "a", ns: str = "acme", timeout_s: float = 30.0
    ) -> None:
        """Wait until a memory of ``entity`` holds ``content``: remember stores the turns at
        once and the memory loop's worker makes them searchable memories in the background."""
        self.drain()
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.call("GET", "/memories", who, ns, params={"entity": entity}).json()
            if any(content in m["content"] for m in found):
                return
            assert time.monotonic() < deadline, f"no memory of {entity} holds {content!r}"
            time.sleep(0.02)


@contextlib.contextmanager
def start_proxy(path: Path, **llm: Any) -> Iterator[ProxyEnv]:
    """Keys: ``a`` (tenant-a), ``b`` (tenant-b), ``a_read`` (read only), ``a_only`` (only
    namespace "only"), ``a_admin`` (tenant-a, purges too), ``op`` (operator). The loop has no LLM of its own (turns are stored,
    extraction waits). ``llm``: settings of the upstream client other than the defaults here."""
    with ScriptedUpstream() as up:
        db = synapsedb.open(path, durability="os", background_maintenance=False, llm=None)
        keys = KeyStore(path)
        tokens = {
            who: keys.create(tenant, scopes, names)[1]
            for who, tenant, scopes, names in [
                ("a", "tenant-a", ["read", "write"], None),
                ("b", "tenant-b", ["read", "write"], None),
                ("a_read", "tenant-a", ["read"], None),
                ("a_only", "tenant-a", ["read", "write"], ["only"]),
                ("a_admin", "tenant-a", ["read", "write", "admin"], None),
                ("op", "ops", ["operator"], None),
            ]
        }
        options: dict[str, Any] = {
            "max_retries": 0,
            "breaker_failures": 1000,
            "timeout_s": 10,
            **llm,
        }
        settings = LLMSettings(
            base_url=up.base_url, model="proxy-model", api_key=UPSTREAM_KEY, **options
        )
        app = create_app(db, keys, llm=settings)
        try:
            with serve(app) as url:
                yield ProxyEnv(url, up, db, app, tokens)
        finally:
            db.close()


def injected(messages: list[dict[str, Any]]) -> list[str]:
    """The system messages the proxy added (they start like recall's context block)."""
    return [
        m["content"]
        for m in messages
        if m["role"] == "system"
        and m["content"].startswith(("Memories about", "Relevant memories"))
    ]
