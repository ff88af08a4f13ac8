"""The remote client: ``synapsedb.connect(url)`` has the methods, arguments and return types
of ``synapsedb.open(path)``, and raises the same exception classes (rebuilt from the server's
error codes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, overload

import httpx

from ..errors import ClosedError, StorageError
from ..times import TimeLike
from ..types import (
    AuditEntry,
    CacheEntry,
    CacheHit,
    CacheStats,
    Event,
    Fact,
    Forgotten,
    Lineage,
    MaintenanceReport,
    Memory,
    Message,
    MessageLike,
    NamespaceConfig,
    QueryResult,
    Recalled,
    Remembered,
    SessionInfo,
    Snapshot,
    Stats,
)
from ..validation import check_agent, check_namespace
from . import calls, feeds
from .calls import Call
from .feeds import Change, Feed, FeedOptions

__all__ = ["RemoteDatabase", "RemoteNamespace"]


class RemoteDatabase:
    """A SynapseDB server. ``client`` lets tests (or callers) supply their own httpx.Client."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: httpx.Client | None = None,
        verify: str | bool = True,
        cert: str | tuple[str, str] | None = None,
        include: Iterable[str] | str | None = None,
    ) -> None:
        self.include = calls.check_include(include)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = client or _client(url, timeout, verify, cert)
        self._http.headers.update(headers)
        self._own = client is None
        self._closed = False

    def _run(self, call: Call) -> Any:
        if self._closed:
            raise ClosedError("the client is closed")
        headers = {"X-Agent": call.agent} if call.agent else {}
        content, content_type = calls.request_body(call)
        if content_type is not None:
            headers["Content-Type"] = content_type
        params = calls.request_params(call, self.include)
        try:
            resp = self._http.request(call.method, call.path, params=params,
                                      content=content,
                                      headers=headers)  # fmt: skip
        except httpx.TransportError as exc:
            raise StorageError(f"server unreachable: {exc}") from exc
        if resp.status_code >= 400:
            raise calls.error_of(resp.status_code, resp.content)
        return calls.decode_answer(call, resp.content)

    def _feed(
        self, call: Call, kind: str, decode: Callable[[str, str], Any], options: FeedOptions
    ) -> Feed[Any]:
        if self._closed:
            raise ClosedError("the client is closed")
        return Feed(self._http, call, kind, decode, options)

    def namespace(self, name: str, *, agent: str | None = None) -> RemoteNamespace:
        return RemoteNamespace(self, check_namespace(name), check_agent(agent))

    def namespaces(self) -> list[str]:
        return self._run(calls.namespaces())  # type: ignore[no-any-return]

    def close(self) -> None:
        if not self._closed and self._own:
            self._http.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteNamespace:
    """Same methods as :class:`synapsedb.Namespace`, over HTTP."""

    __slots__ = ("_agent", "_db", "name")

    def __init__(self, db: RemoteDatabase, name: str, agent: str | None) -> None:
        self._db, self.name, self._agent = db, name, agent

    def __repr__(self) -> str:
        return f"<synapsedb.RemoteNamespace {self.name!r}>"

    def _who(self, agent: str | None) -> str | None:
        return self._agent if agent is None else agent

    def _run(self, call: Call) -> Any:
        return self._db._run(call)

    # -- memories -------------------------------------------------------------------------------

    def write(
        self, entity: str, memory: str | Mapping[str, Any], *, agent: str | None = None
    ) -> Memory:
        return self._run(calls.write(self.name, entity, memory, self._who(agent)))  # type: ignore[no-any-return]

    def write_many(
        self,
        items: Sequence[Mapping[str, Any] | tuple[str, str | Mapping[str, Any]]],
        *,
        agent: str | None = None,
    ) -> list[Memory]:
        return self._run(calls.write_many(self.name, items, self._who(agent)))  # type: ignore[no-any-return]

    def update(
        self,
        id: str,
        changes: Mapping[str, Any],
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory:
        return self._run(calls.update(self.name, id, changes, if_version, self._who(agent)))  # type: ignore[no-any-return]

    @overload
    def get(self, id: str, /, *, as_of: TimeLike | None = None) -> Memory: ...
    @overload
    def get(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> Fact: ...
    def get(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> Memory | Fact:
        if key is not None:
            return self._run(calls.get_fact(self.name, target, key, as_of))  # type: ignore[no-any-return]
        return self._run(calls.get_memory(self.name, target, as_of))  # type: ignore[no-any-return]

    def memories(
        self,
        entity: str | None = None,
        *,
        types: Iterable[str] | None = None,
        as_of: TimeLike | None = None,
        limit: int = 100,
        valid_at: TimeLike | None = None,
        before: str | None = None,
    ) -> list[Memory]:
        return self._run(calls.memories(self.name, entity, types, as_of, limit, valid_at,  # type: ignore[no-any-return]
                                        before))  # fmt: skip

    @overload
    def delete(
        self, id: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Memory: ...
    @overload
    def delete(
        self, entity: str, key: str, /, *, if_version: int | None = None, agent: str | None = None
    ) -> Fact: ...
    def delete(
        self,
        target: str,
        key: str | None = None,
        /,
        *,
        if_version: int | None = None,
        agent: str | None = None,
    ) -> Memory | Fact:
        who = self._who(agent)
        if key is not None:
            return self._run(calls.delete_fact(self.name, target, key, if_version, who))  # type: ignore[no-any-return]
        return self._run(calls.delete_memory(self.name, target, if_version, who))  # type: ignore[no-any-return]

    @overload
    def history(self, id: str, /, *, as_of: TimeLike | None = None) -> list[Memory]: ...
    @overload
    def history(self, entity: str, key: str, /, *, as_of: TimeLike | None = None) -> list[Fact]: ...
    def history(
        self, target: str, key: str | None = None, /, *, as_of: TimeLike | None = None
    ) -> list[Memory] | list[Fact]:
        if key is not None:
            return self._run(calls.fact_history(self.name, target, key, as_of))  # type: ignore[no-any-return]
        return self._run(calls.memory_history(self.name, target, as_of))  # type: ignore[no-any-return]

    # -- retrieval ------------------------------------------------------------------------------

    def query(
        self,
        text: str | None = None,
        *,
        embedding: Sequence[float] | None = None,
        entity: str | None = None,
        filter: Mapping[str, Any] | None = None,
        k: int = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        as_of: TimeLike | None = None,
        valid_at: TimeLike | None = None,
        min_score: float | None = None,
        types: Iterable[str] | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        dedup: bool = True,
        explain: bool = False,
        agent: str | None = None,
        tiers: Sequence[str] | None = None,
        include_ended: bool = False,
    ) -> QueryResult:
        kwargs = {"embedding": embedding, "entity": entity, "filter": filter, "k": k,
                  "mode": mode, "as_of": as_of, "valid_at": valid_at, "min_score": min_score,
                  "types": None if types is None else list(types), "since": since,
                  "until": until, "dedup": dedup, "explain": explain,
                  "agent": self._who(agent),
                  "tiers": None if tiers is None else list(tiers),
                  "include_ended": include_ended or None}  # fmt: skip
        return self._run(calls.query(self.name, text, kwargs))  # type: ignore[no-any-return]

    # -- the memory loop ------------------------------------------------------------------------

    def remember(
        self,
        messages: Any,
        *,
        entity: str,
        session: str | None = None,
        agent: str | None = None,
        memories: Sequence[Mapping[str, Any]] | None = None,
        wait: bool = False,
    ) -> Remembered:
        body = {"messages": messages, "entity": entity, "session": session,
                "agent": self._who(agent), "memories": memories, "wait": wait}  # fmt: skip
        return self._run(calls.remember(self.name, body))  # type: ignore[no-any-return]

    def recall(
        self,
        messages_or_text: Any,
        *,
        entity: str | None = None,
        budget_tokens: int | None = None,
        k: int | None = None,
        threshold: float | None = None,
        rewrite: str | None = None,
        agent: str | None = None,
    ) -> Recalled:
        body = {"entity": entity, "budget_tokens": budget_tokens, "k": k,
                "threshold": threshold, "rewrite": rewrite, "agent": self._who(agent)}  # fmt: skip
        return self._run(calls.recall(self.name, messages_or_text, body))  # type: ignore[no-any-return]

    # -- conversation sessions (the session routes; Sessions(ns) uses them) ---------------------

    @overload
    def session_append(
        self, session_id: str, message_or_messages: list[MessageLike], *,
        searchable: bool | None = None, entity: str | None = None,
    ) -> list[Message]: ...  # fmt: skip
    @overload
    def session_append(
        self, session_id: str, message_or_messages: MessageLike, *,
        searchable: bool | None = None, entity: str | None = None,
    ) -> Message: ...  # fmt: skip
    def session_append(
        self, session_id: str, message_or_messages: MessageLike | list[MessageLike], *,
        searchable: bool | None = None, entity: str | None = None,
    ) -> Message | list[Message]:  # fmt: skip
        """Append a message (or a list: all checked first, at most 1,000) in one request, as
        ``Sessions(ns).append`` / ``append_many``; returns it (them) as stored."""
        call = calls.session_append(self.name, session_id, message_or_messages, searchable,
                                    entity, self._agent)  # fmt: skip
        return self._run(call)  # type: ignore[no-any-return]

    def session_load(
        self, session_id: str, *, last: int | None = None, as_of: TimeLike | None = None,
        strategy: str | None = None, k: int | None = None, max_tokens: int | None = None,
        model: str | None = None, keep: int | None = None, summary_tokens: int | None = None,
        ttl: float | None = None,
    ) -> list[Message]:  # fmt: skip
        """``Sessions(ns, ttl=ttl).load(...)`` run by the server, a strategy included (its
        model summarises; a summarising strategy needs the write scope)."""
        call = calls.session_load(self.name, session_id, self._agent, last=last, as_of=as_of,
                                  strategy=strategy, k=k, max_tokens=max_tokens, model=model,
                                  keep=keep, summary_tokens=summary_tokens, ttl=ttl)  # fmt: skip
        return self._run(call)  # type: ignore[no-any-return]

    def session_clear(self, session_id: str, *, purge: bool = False) -> Forgotten | None:
        """Clear the session (write scope; history keeps it); ``purge``: erase it (admin
        scope), returning what was erased."""
        return self._run(calls.session_clear(self.name, session_id, purge, self._agent))  # type: ignore[no-any-return]

    def session_configure(self, session_id: str, *, ttl: float | None) -> None:
        """``Sessions(ns).configure(session_id, ttl=...)`` (write scope)."""
        # returned: over the async client it is the awaitable
        return self._run(calls.session_configure(self.name, session_id, ttl, self._agent))  # type: ignore[no-any-return]

    def session_purge_expired(self, *, ttl: float | None = None) -> list[str]:
        """``Sessions(ns, ttl=ttl).purge_expired()`` by the server's clock (admin scope)."""
        return self._run(calls.session_purge_expired(self.name, ttl, self._agent))  # type: ignore[no-any-return]

    def session_search(
        self, session_id: str, text: str, *, k: int = 5, as_of: TimeLike | None = None,
        exclude: Sequence[str] = (), ttl: float | None = None,
    ) -> list[Message]:  # fmt: skip
        """``Sessions(ns, ttl=ttl).search(...)``."""
        body = {"k": k, "as_of": as_of, "exclude": exclude, "ttl": ttl}
        return self._run(calls.session_search(self.name, session_id, text, body))  # type: ignore[no-any-return]

    def session_list(self, *, as_of: TimeLike | None = None, ttl: float | None = None) -> list[str]:
        """``Sessions(ns, ttl=ttl).sessions(as_of=...)``."""
        return self._run(calls.session_list(self.name, as_of, ttl))  # type: ignore[no-any-return]

    def session_info(
        self, session_id: str, *, as_of: TimeLike | None = None, count_limit: int = 1000,
        ttl: float | None = None,
    ) -> SessionInfo:  # fmt: skip
        """``Sessions(ns, ttl=ttl).info(...)``."""
        call = calls.session_info(self.name, session_id, as_of=as_of, count_limit=count_limit,
                                  ttl=ttl)  # fmt: skip
        return self._run(call)  # type: ignore[no-any-return]

    # -- the semantic cache (the cache routes; synapsedb.cache.SemanticCache uses them) --------

    def cache_lookup(
        self, key: str, *, scope: str = "default", params: Any = None,
        threshold: float | None = None, match_literals: bool = True, agent: str | None = None,
    ) -> CacheHit | None:  # fmt: skip
        """The cached entry of ``scope`` whose key means what ``key`` means, or None
        (``SemanticCache(db, ns).lookup``, run by the server)."""
        body = {"key": key, "scope": scope, "params": params, "threshold": threshold,
                "match_literals": match_literals, "agent": self._who(agent)}  # fmt: skip
        return self._run(calls.cache_lookup(self.name, body))  # type: ignore[no-any-return]

    def cache_store(
        self, key: str, value: Any, *, scope: str = "default", params: Any = None,
        ttl: float | None = None, tags: Sequence[str] | None = None,
        match_literals: bool = True, agent: str | None = None,
    ) -> CacheEntry:  # fmt: skip
        """Cache ``value`` (JSON) under ``key`` in ``scope`` (``SemanticCache.store``)."""
        body = {"key": key, "value": value, "scope": scope, "params": params, "ttl": ttl,
                "tags": tags if tags is None or isinstance(tags, str) else list(tags), "match_literals": match_literals,
                "agent": self._who(agent)}  # fmt: skip
        return self._run(calls.cache_store(self.name, body))  # type: ignore[no-any-return]

    def cache_invalidate(
        self, key: str | None = None, *, scope: str | None = None, params: Any = None,
        tag: str | None = None, prefix: str | None = None, all: bool = False,
        match_literals: bool = True, agent: str | None = None,
    ) -> int:  # fmt: skip
        """Remove entries by key, tag, prefix or scope, or ``all`` of them; how many
        (``SemanticCache.invalidate`` / ``clear``)."""
        body = {"key": key, "scope": scope, "params": params, "tag": tag, "prefix": prefix,
                "all": all, "match_literals": match_literals, "agent": self._who(agent)}  # fmt: skip
        return self._run(calls.cache_invalidate(self.name, body))  # type: ignore[no-any-return]

    def cache_stats(self) -> CacheStats:
        """Entries, and the server's hit, miss, store and invalidation counts."""
        return self._run(calls.cache_stats(self.name))  # type: ignore[no-any-return]

    # -- lifecycle ------------------------------------------------------------------------------

    def forget(
        self,
        id: str | None = None,
        *,
        entity: str | None = None,
        purge: bool = False,
        agent: str | None = None,
    ) -> Forgotten:
        return self._run(calls.forget(self.name, id, entity, purge, self._who(agent)))  # type: ignore[no-any-return]

    def export(self) -> Iterator[dict[str, Any]]:
        return self._run(calls.export(self.name))  # type: ignore[no-any-return]

    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        return self._run(calls.import_records(self.name, records))  # type: ignore[no-any-return]

    def maintain(self, *, dry_run: bool = False) -> MaintenanceReport:
        return self._run(calls.maintain(self.name, dry_run))  # type: ignore[no-any-return]

    @property
    def config(self) -> NamespaceConfig:
        return self._run(calls.get_config(self.name))  # type: ignore[no-any-return]

    def configure(self, **changes: Any) -> NamespaceConfig:
        return self._run(calls.configure(self.name, changes))  # type: ignore[no-any-return]

    # -- lineage and audit ----------------------------------------------------------------------

    def record_answer(
        self,
        answer_id: str,
        query_ids: Sequence[str],
        *,
        agent: str | None = None,
        text: str | None = None,
        cited: Sequence[str] | None = None,
        entities: Sequence[str] | None = None,
    ) -> Lineage:
        call = calls.record_answer(self.name, answer_id, query_ids, self._who(agent), text, cited,
                                   entities)  # fmt: skip
        return self._run(call)  # type: ignore[no-any-return]

    def lineage(self, answer_id: str) -> Lineage:
        return self._run(calls.lineage(self.name, answer_id))  # type: ignore[no-any-return]

    def audit(
        self,
        entity: str | None = None,
        *,
        agent: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 1000,
    ) -> list[AuditEntry]:
        call = calls.audit(self.name, entity, agent=agent, since=since, until=until, limit=limit)
        return self._run(call)  # type: ignore[no-any-return]

    def snapshot(self, entity: str, *, as_of: TimeLike | None = None) -> Snapshot:
        return self._run(calls.snapshot(self.name, entity, as_of))  # type: ignore[no-any-return]

    # -- KV facts and streams -------------------------------------------------------------------

    def set(
        self,
        entity: str,
        key: str,
        value: Any,
        *,
        if_version: int | None = None,
        ttl: float | None = None,
        agent: str | None = None,
    ) -> Fact:
        call = calls.set_fact(self.name, entity, key, value, if_version, ttl, self._who(agent))
        return self._run(call)  # type: ignore[no-any-return]

    def facts(self, entity: str, *, as_of: TimeLike | None = None) -> list[Fact]:
        return self._run(calls.facts(self.name, entity, as_of))  # type: ignore[no-any-return]

    def append(
        self,
        entity: str,
        event: str | Mapping[str, Any],
        *,
        stream: str | None = None,
        agent: str | None = None,
        searchable: bool = True,
    ) -> Event:
        call = calls.append(self.name, entity, event, stream, self._who(agent), searchable)
        return self._run(call)  # type: ignore[no-any-return]

    def events(
        self,
        stream: str,
        *,
        start: str | None = None,
        end: str | None = None,
        after: str | None = None,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        as_of: TimeLike | None = None,
    ) -> list[Event]:
        call = calls.events(self.name, stream, start=start, end=end, after=after, since=since,
                            until=until, limit=limit, order=order, as_of=as_of)  # fmt: skip
        return self._run(call)  # type: ignore[no-any-return]

    # -- live feeds (Server-Sent Events; remote only: the server keeps the feed) ------------

    def follow(
        self,
        stream: str,
        *,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> Feed[Event]:
        """Follow a stream live: its events after ``after`` (all without it), then each new
        one as it is committed, resuming with ``Last-Event-ID`` when the connection drops
        (``synapsedb.client.feeds``). ``for ev in mem.follow("user:1"): ...``; over the async
        client ``async for``. Ends with ``idle_timeout`` seconds without events, ``close()``
        or ``break``."""
        options = FeedOptions(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(calls.follow(self.name, stream), "event", feeds.decode_event,
                              options)  # fmt: skip

    def changes(
        self,
        *,
        entity: str | None = None,
        since: TimeLike | None = None,
        after: str | None = None,
        idle_timeout: float | None = None,
        retries: int = 5,
        retry_delay: float = 0.25,
        retry_max_delay: float = 5.0,
    ) -> Feed[Change]:
        """Follow every change committed in the namespace (or about ``entity``), from now, from
        ``since`` (history first) or after ``after``; a dropped connection resumes after the
        last change yielded (exact on the same server process; after a restart, replayed
        from durable history)."""
        options = FeedOptions(after, idle_timeout, retries, retry_delay, retry_max_delay)
        return self._db._feed(calls.changes(self.name, entity, since), "change",
                              feeds.decode_change, options)  # fmt: skip

    # -- overview -------------------------------------------------------------------------------

    def entities(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Sorted names; a page with ``limit`` (1 to 10,000), ``after`` (names strictly after
        it) and ``prefix``, as embedded."""
        return self._run(calls.entities(self.name, as_of, prefix, after, limit))  # type: ignore[no-any-return]

    def streams(
        self,
        *,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Sorted stream names; a page with ``limit`` (1 to 10,000), ``after`` (names strictly
        after it) and ``prefix``, as embedded."""
        return self._run(calls.streams(self.name, as_of, prefix, after, limit))  # type: ignore[no-any-return]

    def stats(self) -> Stats:
        return self._run(calls.stats(self.name))  # type: ignore[no-any-return]


def _client(
    url: str, timeout: float, verify: str | bool, cert: str | tuple[str, str] | None
) -> httpx.Client:
    """``verify``: True, False or a CA bundle path; ``cert``: a client certificate (mutual
    TLS) as a PEM path or (cert, key) paths."""
    import ssl

    ctx: ssl.SSLContext | bool = (
        verify if isinstance(verify, bool) else ssl.create_default_context(cafile=verify)
    )
    if cert is not None:
        if not isinstance(ctx, ssl.SSLContext):
            verify_server = ctx
            ctx = ssl.create_default_context()
            if not verify_server:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        certfile, keyfile = (cert, None) if isinstance(cert, str) else cert
        ctx.load_cert_chain(certfile, keyfile)
    return httpx.Client(base_url=url.rstrip("/"), timeout=timeout, verify=ctx)
