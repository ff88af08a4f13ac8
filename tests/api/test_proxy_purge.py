"""What the memory proxy stores from a user's turns is erased with the user, and with the
session: after ``forget(entity=<user>, purge=True)`` or ``DELETE sessions/<id>?purge=true`` the
user's words are in no file of the data directory (response records, answer texts, turns), and
a ``previous_response_id`` chain through them is a 400 "no response".

The official ``openai`` SDK is the client; the upstream is ScriptedUpstream, a stand-in for a
hosted model that records what it was sent (tests/support/proxy_env.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import openai
import pytest

from tests.support.proxy_env import ProxyEnv
from tests.support.scripted_upstream import Reply


def files_holding(root: Path, *words: str) -> dict[str, list[str]]:
    """The files under ``root`` (database, WAL, indexes ...) that hold any of ``words``."""
    out: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        found = [w for w in words if w.encode() in raw]
        if found:
            out[str(path.relative_to(root))] = found
    return out


def talk(proxy: ProxyEnv, user: str, session: str | None, secret: str, answer: str) -> str:
    """A Responses chain of two turns and a chat completion, each saying ``secret`` and
    answered with ``answer``; returns the first response's id."""
    headers = {"X-SynapseDB-Session": session} if session else {}
    proxy.upstream.push(
        Reply.text(f"{answer} (1)"), Reply.text(f"{answer} (2)"), Reply.text(f"{answer} (3)")
    )
    with proxy.sdk("a") as client:
        first = client.responses.create(
            model="m",
            user=user,
            extra_headers=headers,
            input=f"Keep this safe: my locker code is {secret}.",
        )
        client.responses.create(
            model="m",
            previous_response_id=first.id,
            extra_headers=headers,
            input=f"Say {secret} back to me.",
        )
        client.chat.completions.create(
            model="m",
            user=user,
            extra_headers=headers,
            messages=[{"role": "user", "content": f"Is {secret} a good locker code?"}],
        )
    proxy.drain()
    return first.id


def continue_chain(proxy: ProxyEnv, previous: str) -> openai.BadRequestError:
    with proxy.sdk("a") as client, pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="m", previous_response_id=previous, input="And then?")
    return err.value


def test_a_purge_of_the_user_erases_what_the_proxy_stored_and_breaks_the_chain(
    proxy: ProxyEnv,
) -> None:
    secret, answer = "PLUM-7734-QX", "Stored your code PLUM-7734-QX"
    other = talk(proxy, "user:keep", None, "FIG-1000-KEEP", "Stored FIG-1000-KEEP")
    first = talk(proxy, "user:42", None, secret, answer)
    data = proxy.db.path
    assert files_holding(data, secret, answer)  # stored (records, answers, turns)
    forgot = proxy.call("POST", "/forget", "a_admin", json={"entity": "user:42", "purge": True})
    assert forgot.status_code == 200 and forgot.json()["pending"] is False, forgot.text
    assert files_holding(data, secret, "Stored your code") == {}
    sent = len(proxy.upstream.chat_requests())
    err = continue_chain(proxy, first)
    assert err.param == "previous_response_id" and f"no response {first!r}" in err.message
    assert len(proxy.upstream.chat_requests()) == sent  # nothing went to the model
    # the user's answers stay recorded (lineage shows that they existed), their text erased
    lineage = proxy.call("GET", f"/answers/{first}/lineage").json()
    assert (lineage["text"], lineage["erased"]) == (None, True)
    # another user's words and chain are untouched
    assert "synapse.db" in files_holding(data, "FIG-1000-KEEP")
    proxy.upstream.push(Reply.text("Still here."))
    with proxy.sdk("a") as client:
        out = client.responses.create(model="m", previous_response_id=other, input="Hello?")
    assert out.output_text == "Still here."
    assert "FIG-1000-KEEP" in str(proxy.upstream.chat_requests()[-1].messages)


def test_a_purge_of_the_session_erases_its_records_answers_and_turns(
    proxy: ProxyEnv,
) -> None:
    secret, answer = "PEAR-5512-ZZ", "Stored your code PEAR-5512-ZZ"
    first = talk(proxy, "user:77", "trip-9", secret, answer)
    lineages = [proxy.call("GET", f"/answers/{first}/lineage").json()]
    assert lineages[0]["entities"] == ["user:77", "session:trip-9"]
    gone = proxy.call("DELETE", "/sessions/trip-9", "a_admin", params={"purge": "true"})
    assert gone.status_code == 200, gone.text
    err = continue_chain(proxy, first)
    assert err.param == "previous_response_id"
    lineage = proxy.call("GET", f"/answers/{first}/lineage").json()
    assert lineage["text"] is None and lineage["erased"] is True
    assert lineage["entities"][0] == "user:77" and lineage["entities"][1].startswith("erased:")
    # no row the proxy writes holds the words: answers, the records and the turns (events),
    # facts. (The memory loop's searchable copies of the turns and the recall's query log are
    # the loop's: a session purge does not reach them yet, a purge of the user does.)
    db = sqlite3.connect(proxy.db.path / "synapse.db")
    try:
        for table, column in [
            ("answers", "text"),
            ("events", "content"),
            ("events", "data"),
            ("fact_versions", "value"),
        ]:
            hits = db.execute(
                f"SELECT count(*) FROM {table} WHERE {column} LIKE ?", (f"%{secret[:9]}%",)
            ).fetchone()[0]
            assert hits == 0, (table, column)
    finally:
        db.close()
