"""``synapsedb chat``: a conversation in the terminal, through the memory proxy, kept in a session.

Each line typed is one turn. The chat loads the session's context from the server with a
strategy (``GET .../sessions/{sid}/messages?strategy=window&k=20``: the last messages, a token
budget, a running summary, or the turns relevant to the question), sends it with the new line
to the memory proxy (``POST .../chat/completions``, streamed, ``X-SynapseDB-Session``: the
session) and prints the answer as it arrives. The proxy recalls the user's memories into the
request and, once the answer is complete, stores the user's line and the answer in the
session's stream (``remember``): that is what keeps the conversation, so the chat never appends
the turns itself (they would be stored twice). Before the next turn it waits until the answer
is in the session, so a fast typist (or a script on standard input) gets the whole context.

Commands: ``/exit`` (or the end of input) ends the chat, ``/clear`` empties the session (a
write: history and ``as_of`` still see what was there; the user's extracted memories stay),
``/help`` lists them. Exit status 0, or 2 when the server cannot be reached at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import quote

from .errors import SynapseError

__all__ = ["Chat", "add_parser"]

STRATEGIES = ("window", "token_buffer", "summary_buffer", "buffer", "vector")
DESCRIPTION = (
    "A conversation in the terminal through the server's memory proxy (it needs "
    "SYNAPSEDB_LLM_BASE_URL), kept in a session: each line is a turn, sent with the session's "
    "context (--strategy, --window, --max-tokens) and answered as the model streams; the proxy "
    "recalls the user's memories and stores the turn in the session. /exit ends, /clear "
    "empties the session."
)
HELP = (
    "/exit (or the end of input) ends the chat; /clear empties the session (history keeps "
    "it); /help shows this"
)


class ChatError(Exception):
    """A turn that failed: said on standard error, and the chat goes on."""


def add_parser(sub: Any, remote: argparse.ArgumentParser) -> None:
    """Register ``chat`` (``remote`` gives ``--url``, ``--api-key``, ``--namespace``,
    ``--agent``)."""
    p = sub.add_parser(
        "chat",
        parents=[remote],
        help="chat in the terminal through the memory proxy, in a session",
        description=DESCRIPTION,
    )
    p.add_argument(
        "--session",
        default=os.environ.get("SYNAPSEDB_SESSION"),
        help="session id: name one to resume its conversation (default: a new "
        "chat-<time>-<hex>; env SYNAPSEDB_SESSION)",
    )
    p.add_argument(
        "--user",
        default=os.environ.get("SYNAPSEDB_USER"),
        help="entity whose memories are recalled and stored, e.g. user:42 (default: "
        "the proxy's user:default; env SYNAPSEDB_USER)",
    )
    p.add_argument(
        "--model",
        default=os.environ.get("SYNAPSEDB_CHAT_MODEL"),
        help="model asked for (default: the server's SYNAPSEDB_LLM_MODEL)",
    )
    p.add_argument("--system", help="system prompt sent first with every turn (not stored)")
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="window",
        help="what of the session goes with each turn (default: window)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=20,
        help="messages of the window, or turns the vector strategy finds (default 20)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=3000,
        help="token budget of token_buffer and summary_buffer (default 3000)",
    )
    p.add_argument(
        "--store-wait",
        type=float,
        default=10.0,
        help="seconds to wait for an answer to be in the session before the next turn (default 10)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    session = args.session or f"chat-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    chat = Chat(
        args.url,
        api_key=args.api_key,
        namespace=args.namespace,
        session=session,
        user=args.user,
        model=args.model,
        system=args.system,
        strategy=args.strategy,
        window=args.window,
        max_tokens=args.max_tokens,
        agent=args.agent,
        store_wait=args.store_wait,
    )
    try:
        return chat.loop(sys.stdin, sys.stdout, sys.stderr)
    finally:
        chat.close()


class Chat:
    """One terminal conversation: the session on the server, the proxy for the answers."""

    def __init__(
        self,
        url: str,
        *,
        session: str,
        api_key: str | None = None,
        namespace: str = "default",
        user: str | None = None,
        model: str | None = None,
        system: str | None = None,
        strategy: str = "window",
        window: int = 20,
        max_tokens: int = 3000,
        agent: str | None = None,
        store_wait: float = 10.0,
        timeout: float = 300.0,
    ) -> None:
        import httpx

        from . import connect
        from .conversation import Sessions

        self.session, self.user, self.model, self.system = session, user, model, system
        self.strategy, self.store_wait = strategy, store_wait
        self.options: dict[str, Any] = (
            {"k": window}
            if strategy in ("window", "vector")
            else {"max_tokens": max_tokens}
            if strategy in ("token_buffer", "summary_buffer")
            else {}
        )
        self._db = connect(url, api_key=api_key, timeout=timeout)
        self.sessions = Sessions(self._db.namespace(namespace, agent=agent))
        headers = {"X-SynapseDB-Session": session}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if agent:
            headers["X-Agent"] = agent
        base = f"{url.rstrip('/')}/v1/namespaces/{quote(namespace, safe='')}"
        self._http = httpx.Client(base_url=base, headers=headers, timeout=timeout)
        self._transport_errors: tuple[type[Exception], ...] = (httpx.TransportError,)

    def close(self) -> None:
        self._http.close()
        self._db.close()

    # -- the conversation ---------------------------------------------------------------------

    def loop(self, stdin: IO[str], out: IO[str], err: IO[str]) -> int:
        """Read lines until ``/exit`` or the end of input; each other line is a turn."""
        try:
            count = self.sessions.info(self.session).count
        except SynapseError as exc:
            print(f"error [{exc.code}]: {exc.message}", file=err)
            return 2
        resumed = f", resuming {count} messages" if count else ""
        print(f"synapsedb chat: session {self.session!r}{resumed} (/help for commands)", file=err)
        interactive = stdin.isatty()
        try:
            while True:
                if interactive:
                    out.write("you> ")
                    out.flush()
                line = stdin.readline()
                if not line:
                    return 0
                text = line.strip()
                if not text:
                    continue
                if text in ("/exit", "/quit"):
                    return 0
                if text == "/help":
                    print(HELP, file=err)
                elif text == "/clear":
                    self._command(lambda: self.sessions.clear(self.session), "session cleared", err)
                elif text.startswith("/") and " " not in text:
                    print(f"unknown command {text}; {HELP}", file=err)
                else:
                    try:
                        self.turn(text, out, interactive)
                    except (ChatError, SynapseError) as exc:
                        print(f"\nerror: {exc}", file=err)
                    except self._transport_errors as exc:
                        print(f"\nerror: server unreachable: {exc}", file=err)
        except KeyboardInterrupt:
            out.write("\n")
            return 130

    def _command(self, action: Any, done: str, err: IO[str]) -> None:
        try:
            action()
            print(f"({done})", file=err)
        except SynapseError as exc:
            print(f"error [{exc.code}]: {exc.message}", file=err)

    def turn(self, text: str, out: IO[str], interactive: bool = False) -> str:
        """Send ``text`` with the session's context; print and return the answer once it is
        in the session (or ``store_wait`` has passed: a warning, the turn still counts)."""
        context = self.sessions.load(self.session, strategy=self.strategy, **self.options)
        newest = self.sessions.load(self.session, last=1)
        before = newest[0].id if newest else None
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages += [m.to_openai() for m in context]
        messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {"messages": messages, "stream": True}
        if self.model:
            body["model"] = self.model
        if self.user:
            body["user"] = self.user
        if interactive:
            out.write("assistant> ")
        answer = self._stream(body, out)
        if not self._stored(before):
            raise ChatError(
                f"the answer is not in session {self.session!r} after "
                f"{self.store_wait:g} s; the next turn may miss it"
            )
        return answer

    def _stream(self, body: dict[str, Any], out: IO[str]) -> str:
        parts: list[str] = []
        with self._http.stream("POST", "/chat/completions", json=body) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise ChatError(f"HTTP {resp.status_code}: {_error_message(resp.content)}")
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if isinstance(chunk, dict) and "error" in chunk:
                    raise ChatError(_error_message(data.encode()))
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        out.write(delta)
                        out.flush()
                        parts.append(delta)
        out.write("\n")
        out.flush()
        return "".join(parts)

    def _stored(self, before: str | None) -> bool:
        """Whether the proxy has put an answer newer than ``before`` in the session (it does
        so in the background, once the answer is complete), waiting up to ``store_wait``."""
        deadline = time.monotonic() + self.store_wait
        while True:
            newest = self.sessions.load(self.session, last=1)
            if newest and newest[0].id != before and newest[0].role == "assistant":
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def _error_message(raw: bytes) -> str:
    try:
        err = json.loads(raw)["error"]
        return str(err.get("message") or err)
    except (ValueError, KeyError, TypeError):
        return raw[:300].decode("utf-8", "replace")
