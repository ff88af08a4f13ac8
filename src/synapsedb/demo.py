"""``synapsedb demo``: the refund story (three support agents sharing memory) against a running server.

Three stateless agents share one memory. Intake records what the customer said, knowledge
recalls what is already known instead of re-running a document search, resolution answers
without asking for the order number again and records the answer's lineage.
"""

from __future__ import annotations

import secrets
from typing import Any

__all__ = ["run_demo"]


def _say(agent: str, text: str) -> None:
    print(f"[{agent:>10}] {text}")


def run_demo(db: Any, namespace: str | None = None) -> str:
    """Play the story in a fresh namespace; returns the answer id."""
    ns = namespace or f"demo-{secrets.token_hex(3)}"
    intake = db.namespace(ns, agent="intake")
    knowledge = db.namespace(ns, agent="knowledge")
    resolution = db.namespace(ns, agent="resolution")
    print(f"namespace {ns}: three agents, one shared memory\n")

    print("-- last week --")
    intake.write(
        "user:4321",
        {
            "content": "Refund requested for order #1458",
            "salience": 0.9,
            "ts": "2025-10-17T09:30:00Z",
        },
    )
    intake.set("user:4321", "last_order", {"id": 1458, "status": "refund requested"})
    knowledge.write(
        "user:4321",
        {
            "content": "Customer refund for order #1458 initiated on 10/20",
            "ts": "2025-10-20T11:00:00Z",
        },
    )
    knowledge.write(
        "policy:refunds",
        {
            "content": "Refunds reach the card 5-7 business days after initiation",
            "type": "procedure",
            "salience": 0.8,
        },
    )
    resolution.append(
        "user:4321",
        {"content": "Refund confirmation email sent 10/21", "ts": "2025-10-21T08:00:00Z"},
    )
    _say("intake", "wrote: refund requested for order #1458 (salience 0.9)")
    _say("knowledge", "wrote: refund initiated 10/20; the refund policy")
    _say("resolution", "appended: confirmation email sent 10/21")

    print('\n-- today: "I still haven\'t received my refund." --')
    intake.write(
        "user:4321", {"content": "Customer says the refund has not arrived", "type": "interaction"}
    )
    seen = intake.query("user:4321 refund", k=3)
    _say("intake", f"classified: refund follow-up; recalled {len(seen)} earlier refund memories")
    for h in seen:
        _say("intake", f"  {h.score:.3f}  {h.content}")

    known = knowledge.query("user:4321 refund status", k=5)
    policy = knowledge.query("how long do refunds take", entity="policy:refunds", k=1)
    _say("knowledge", "no document search needed; recalled:")
    for h in [*known, *policy]:
        _say("knowledge", f"  {h.score:.3f}  {h.content}")

    order = resolution.get("user:4321", "last_order").value
    _say("resolution", f"order number already known: #{order['id']} (not asking again)")
    answer = (
        f"Your refund for order #{order['id']} was initiated on 10/20; refunds reach the "
        "card 5-7 business days after initiation."
    )
    # cite what the answer's text uses: the initiation date and the policy
    cited = [h.id for h in known if "initiated" in h.content] + [h.id for h in policy]
    answer_id = f"answer-{secrets.token_hex(3)}"
    lin = resolution.record_answer(
        answer_id, [known.query_id, policy.query_id], text=answer, cited=cited
    )
    resolution.append("user:4321", "Refund confirmed delivered on 10/28.")
    _say("resolution", f"answered: {answer}")

    print(f"\n-- lineage of {answer_id}: which memories the answer was built on --")
    for q in lin.queries:
        print(f"  query {q.query_id} by {q.agent}: {q.text!r}")
        for h in q.hits:
            print(f"    {h.id} v{h.version}  score {h.score}  {h.content}")
    print("  cited:")
    for c in lin.cited:
        print(f"    {c.id} v{c.version}  {c.content}")
    print(
        f"\naudit of user:4321: {len(resolution.audit('user:4321'))} entries "
        f"(writes, appends, queries, the answer)"
    )
    return answer_id
