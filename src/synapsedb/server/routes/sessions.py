"""The session load route (``GET .../sessions/{sid}/messages``): the one session operation
with a hand-written handler, since its answer adds what the strategy did (the summary standing
for older turns) to the messages. The other session routes are plain rows of the operations
table over ``ns.sessions`` (synapsedb.conversation.local), run as embedded.

A load with a summarising strategy (``summary``, ``summary_buffer``) writes the session's
``summary`` fact as it folds new turns, so that GET needs ``write`` too (the row's
``escalate``): a summary computed and thrown away would send the whole unsummarised history to
the model on every load. Its model is the server's (the memory loop's LLM,
``SYNAPSEDB_LLM_*``); none: extractive.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...conversation.local import summary_of
from ...engine import Namespace
from ...surface import BY_NAME
from ...surface.operations import SUMMARISING
from ..plain import Parser
from ..wire import json_response

LOAD = Parser(BY_NAME["sessions.load"])


async def load(request: Request, mem: Namespace) -> Response:
    args, ns = await LOAD.parse(request, mem)
    sid, strategy = args.pop("session_id"), args.get("strategy")
    msgs = await run_in_threadpool(lambda: ns.sessions.load(sid, **args))
    summary = summary_of(msgs) if strategy in SUMMARISING else None
    return json_response(
        {"messages": [m.to_dict() for m in msgs], "strategy": strategy, "summary": summary}
    )
