"""``synapsedb demo --story hawaii``: two chat sessions, through the memory proxy.

Session A (March 15) tells the assistant the budget for the Hawaii trip, in a Responses API
chain. Session B (March 20) starts a NEW chain, without ``previous_response_id``, and asks
"What's my budget for the trip?". Without memory the chain's knowledge is lost; through
SynapseDB the proxy recalls the extracted memory, injects it, and records which memories the
answer was built on. It talks to a running ``synapsedb serve`` that has an upstream model
configured (``SYNAPSEDB_LLM_BASE_URL``), exactly as an unmodified OpenAI client would.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import httpx

from .errors import NotFoundError

__all__ = ["run_hawaii"]


def _say(who: str, text: str) -> None:
    print(f"[{who:>9}] {text}")


def _text(response: dict[str, Any]) -> str:
    if isinstance(response.get("output_text"), str):
        return str(response["output_text"])
    parts = [
        c.get("text", "")
        for item in response.get("output") or []
        if isinstance(item, dict)
        for c in item.get("content") or []
        if isinstance(c, dict)
    ]
    return "".join(p for p in parts if isinstance(p, str))


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = http.post(path, json=body)
    if r.status_code >= 400:
        try:
            msg = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            msg = r.text[:300]
        raise SystemExit(f"error: {path}: HTTP {r.status_code}: {msg}")
    out: dict[str, Any] = r.json()
    return out


def run_hawaii(
    db: Any,
    url: str,
    api_key: str | None,
    namespace: str | None = None,
    *,
    wait_s: float = 120.0,
) -> str:
    """Play the story in a fresh namespace; returns the id of session B's answer."""
    ns = namespace or f"demo-{secrets.token_hex(3)}"
    user = f"user:{secrets.token_hex(2)}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = f"{url.rstrip('/')}/v1/namespaces/{ns}"
    mem = db.namespace(ns)
    print(f"namespace {ns}, user {user}: an OpenAI client whose base URL is {base}\n")
    with httpx.Client(base_url=base, headers=headers, timeout=300.0) as http:
        print("-- session A (March 15) --")
        q1 = "I'm planning a trip to Hawaii in June."
        a = _post(http, "/responses", {"input": q1, "user": user})
        _say("user", q1)
        _say("assistant", _text(a))
        q2 = "My budget for the Hawaii trip is $10,000."
        a = _post(http, "/responses", {"input": q2, "user": user, "previous_response_id": a["id"]})
        _say("user", q2)
        _say("assistant", _text(a))

        print("\n-- between sessions: the proxy extracts memories in the background --")
        kinds = ["fact", "preference", "procedure", "episode"]
        deadline = time.monotonic() + wait_s
        seen_job = False
        while time.monotonic() < deadline:  # the proxy queues the job after its answer
            pending = [
                f
                for f in mem.facts("synapsedb:jobs")
                if isinstance(f.value, dict) and f.value.get("state") != "failed"
            ]
            seen_job = seen_job or bool(pending)
            if not pending and (seen_job or mem.memories(user, types=kinds)):
                break
            time.sleep(0.2)
        else:
            print(f"  extraction still queued after {wait_s:.0f} s (is the model up?)")
        for m in mem.memories(user, types=kinds):
            _say("memory", f"{m.type}: {m.content}")

        print("\n-- session B (March 20): a NEW chain, no previous_response_id --")
        q3 = "What's my budget for the trip?"
        b = _post(http, "/responses", {"input": q3, "user": user})
        _say("user", q3)
        _say("assistant", _text(b))
    lin = None
    deadline = time.monotonic() + 10
    while lin is None:  # the answer is recorded just after it was sent
        try:
            lin = mem.lineage(b["id"])
        except NotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    print(f"\n-- lineage of {b['id']}: the memories the answer was built on --")
    for c in lin.cited:
        print(f"  {c.id} v{c.version}  {c.content}")
    if not lin.cited:
        print("  (none: nothing was recalled)")
    return str(b["id"])
