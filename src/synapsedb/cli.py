"""The ``synapsedb`` command line: a thin shell over the library."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from . import __version__, connect
from . import open as open_db
from .errors import SynapseError, ValidationError

if TYPE_CHECKING:
    from .server.limits import Limits


def _stats(args: argparse.Namespace) -> int:
    with open_db(args.data) as db:
        names = [args.namespace] if args.namespace else db.namespaces()
        out = {n: dataclasses.asdict(db.namespace(n).stats()) for n in names}
    print(json.dumps(out, indent=2))
    return 0


def is_loopback(host: str) -> bool:
    """Whether ``host`` binds only this machine (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_mode(args: argparse.Namespace, live_keys: bool) -> Literal["keys", "none"]:
    """Whether the server needs keys, decided once at start and failing closed: ``--auth`` (or
    SYNAPSEDB_AUTH) if given, else ``keys`` off loopback or when keys.db has a live key, else
    ``none``. Raises ValidationError when that mode must not run: ``keys`` with no live key,
    ``none`` off loopback without ``--insecure-open``."""
    host, data = args.host, args.data
    if args.auth not in (None, "", "keys", "none"):
        raise ValidationError(f"auth: expected keys or none, got {args.auth!r}", field="auth")
    loopback = is_loopback(host)
    mode: Literal["keys", "none"] = args.auth or ("keys" if live_keys or not loopback else "none")
    if mode == "keys" and not live_keys:
        raise ValidationError(
            f"refusing to serve {host} with --auth keys without API keys; create one with "
            f"'synapsedb keys create --data {data} --tenant NAME --scopes read,write'"
            + ("" if args.auth else " or bind 127.0.0.1 for open local access"),
            field="auth",
        )
    if mode == "none" and not loopback and not args.insecure_open:
        raise ValidationError(
            f"refusing to serve {host} with --auth none: anyone who reaches it could read and "
            "write every namespace; use --auth keys, bind 127.0.0.1, or add --insecure-open "
            "if something in front of the server authenticates every request",
            field="auth",
        )
    return mode


def http_limits(args: argparse.Namespace) -> tuple[Limits, list[str] | None]:
    """The server's connection limits and the Host names it answers to: a loopback server
    only its loopback names (so a web page cannot reach it through DNS rebinding) and
    ``--allowed-hosts``; any other only ``--allowed-hosts`` when given. Raises the open-file
    limit to fit ``--max-connections`` (lowering that, with a warning, when it cannot)."""
    from .server.limits import Limits
    from .server.middleware import LOOPBACK_HOSTS, RequestGuard

    names = [h.strip() for h in (args.allowed_hosts or "").split(",") if h.strip()]
    hosts = [*sorted(LOOPBACK_HOSTS), args.host, *names] if is_loopback(args.host) else names
    RequestGuard(hosts)  # a malformed name is refused now, before anything opens
    max_connections = args.max_connections
    if isinstance(max_connections, int) and max_connections > 0:
        max_connections = _open_files_for(max_connections)
    limits = Limits(body_timeout=args.body_timeout, header_timeout=args.header_timeout,
                    keep_alive=args.keep_alive_timeout, max_connections=max_connections,
                    max_import_bytes=args.max_import_bytes)  # fmt: skip
    return limits, hosts or None


def _open_files_for(connections: int, spare: int = 256) -> int:
    """Raise this process's open-file limit to ``connections`` plus ``spare`` (the data
    files, logs); the connections that fit when the hard limit is lower."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = connections + spare
    if soft == resource.RLIM_INFINITY or soft >= need:
        return connections
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target >= need:
        return connections
    fits = max(1, target - spare)
    print(f"warning: --max-connections {connections} needs {need} open files and the limit is "
          f"{target} (ulimit -n): serving at most {fits} connections", file=sys.stderr)  # fmt: skip
    return fits


def _serve(args: argparse.Namespace) -> int:
    from .server.keys import KeyStore

    keys = KeyStore(args.data)
    live_keys = keys.has_live_keys()
    try:
        auth = auth_mode(args, live_keys)
    except ValidationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if auth == "none" and live_keys:
        print("warning: --auth none: the API keys in keys.db are ignored and tenants' "
              "namespaces cannot be reached", file=sys.stderr)  # fmt: skip
    if args.tls_client_ca and not (args.tls_cert and args.tls_key):
        print("error: --tls-client-ca needs --tls-cert and --tls-key", file=sys.stderr)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    for path in (args.tls_cert, args.tls_key, args.tls_client_ca):
        if path and not os.path.isfile(path):
            print(f"error: {path}: no such file", file=sys.stderr)
            return 2
    try:
        limits, hosts = http_limits(args)
    except ValidationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    import ssl

    import uvicorn

    from .config import LLMSettings, Settings
    from .server import create_app
    from .server.observe import Tracing, configure_logging
    from .validation import check_namespace

    configure_logging(args.log_level, args.log_format)
    if args.blas_threads < 1:
        print("error: --blas-threads: expected 1 or more", file=sys.stderr)
        return 2
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    # process-wide and for good: OpenBLAS worker threads busy-wait between calls, which on a
    # 2-core box burned a core and doubled text query latency (docs/benchmarks.md, issue 11)
    threadpool_limits(limits=args.blas_threads, user_api="blas")
    tracing = Tracing(args.otel_exporter, endpoint=args.otel_endpoint)
    settings = Settings.from_env()
    try:
        llm = LLMSettings.from_env()
        check_namespace(args.proxy_namespace)
    except ValidationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    db = open_db(args.data, settings=settings, llm=llm)
    try:
        mode = "API keys required" if auth == "keys" else "open access (--auth none)"
        scheme = "https" if args.tls_cert else "http"
        if args.tls_client_ca:
            mode += ", client certificates required"
        if tracing.enabled:
            mode += f", traces to {args.otel_exporter}"
        print(f"synapsedb {__version__}: serving {args.data} on "
              f"{scheme}://{args.host}:{args.port} ({mode})", flush=True)  # fmt: skip
        app = create_app(db, keys if auth == "keys" else None, tracing, auth=auth,
                         max_feeds_per_key=args.max_feeds_per_key, limits=limits,
                         allowed_hosts=hosts, llm=llm,
                         proxy_namespace=args.proxy_namespace)  # fmt: skip
        uvicorn.run(
            app, host=args.host, port=args.port,
            log_level=args.log_level, log_config=None, access_log=False, loop=args.loop,
            server_header=False,
            **limits.uvicorn_options(),  # timeouts, connection limits, guarded HTTP protocol
            ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
            ssl_ca_certs=args.tls_client_ca,
            ssl_cert_reqs=ssl.CERT_REQUIRED if args.tls_client_ca else ssl.CERT_NONE,
        )  # fmt: skip
    finally:
        db.close()
    return 0


def _keys(args: argparse.Namespace) -> int:
    from .server.keys import OPERATOR, KeyStore

    store = KeyStore(args.data)
    if args.keys_command == "create":
        scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
        names = [n.strip() for n in args.namespaces.split(",")] if args.namespaces else None
        agents = [a.strip() for a in args.agents.split(",")] if args.agents else None
        tenant = args.tenant
        if tenant is None:
            if scopes != [OPERATOR]:
                raise ValidationError("tenant: required (--tenant), except for an operator-only "
                                      "key (--scopes operator)", field="tenant")  # fmt: skip
            tenant = OPERATOR  # an operator-only key reaches no tenant's data
        key, token = store.create(tenant, scopes, names, args.rate, agents)
        print(json.dumps({"id": key.id, "tenant": key.tenant, "scopes": list(key.scopes),
                          "namespaces": names, "rate": key.rate, "agents": agents,
                          "key": token}, indent=2))  # fmt: skip
        print("store the key now: it is not kept and cannot be shown again", file=sys.stderr)
    elif args.keys_command == "list":
        for name, limit in sorted(store.tenant_rates().items()):
            print(json.dumps({"tenant": name, "rate": limit}))
        for k in store.list():
            print(json.dumps({"id": k.id, "tenant": k.tenant, "scopes": list(k.scopes),
                              "namespaces": k.namespaces, "rate": k.rate, "agents": k.agents,
                              "revoked": k.revoked}))  # fmt: skip
    elif args.keys_command == "limit":
        try:
            rate = None if args.rate.lower() == "none" else float(args.rate)
        except ValueError:
            raise ValidationError(f"rate: expected requests per second or 'none', got "
                                  f"{args.rate!r}", field="rate") from None  # fmt: skip
        store.set_tenant_rate(args.tenant, rate)
        print(json.dumps({"tenant": args.tenant, "rate": rate}))
    else:
        store.revoke(args.id)
        print(f"revoked {args.id}")
    return 0


def _print(value: Any) -> None:
    import msgspec

    from .server.wire import encoder, plain

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = plain(value)
    elif isinstance(value, list):
        value = [plain(v) if dataclasses.is_dataclass(v) else v for v in value]
    print(msgspec.json.format(encoder.encode(value), indent=2).decode())


def _private_file(path: str) -> Any:
    """``path`` opened for writing, readable by its owner only (also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def _remote(args: argparse.Namespace) -> int:
    db = connect(args.url, api_key=args.api_key)
    try:
        mem = db.namespace(args.namespace, agent=args.agent)
        cmd = args.command
        if cmd == "write":
            memory: dict[str, Any] = {"content": args.text, "type": args.type}
            if args.salience is not None:
                memory["salience"] = args.salience
            if args.metadata:
                memory["metadata"] = json.loads(args.metadata)
            _print(mem.write(args.entity, memory))
        elif cmd == "query":
            res = mem.query(
                args.text, k=args.k, entity=args.entity, as_of=args.as_of,
                valid_at=args.valid_at, filter=json.loads(args.filter) if args.filter else None,
            )  # fmt: skip
            if args.json:
                _print(res)
            else:
                print(f"query {res.query_id}" + (f" (entity {res.entity})" if res.entity else ""))
                for h in res:
                    print(f"{h.score:8.4f}  {h.id}  [{h.entity}] {h.content}")
        elif cmd == "get":
            _print(mem.get(args.target, args.key, as_of=args.as_of) if args.key
                   else mem.get(args.target, as_of=args.as_of))  # fmt: skip
        elif cmd == "set":
            _print(mem.set(args.entity, args.key, json.loads(args.value)))
        elif cmd == "export":
            # an export holds every memory: readable by its owner only, like the data directory
            out = _private_file(args.out) if args.out else sys.stdout.buffer
            import msgspec

            enc = msgspec.json.Encoder()
            n = 0
            for rec in mem.export():
                out.write(enc.encode(rec) + b"\n")
                n += 1
                if n % 10_000 == 0:
                    print(f"\rexported {n:,} records", end="", file=sys.stderr, flush=True)
            if args.out:
                out.close()
            print(f"\rexported {n:,} records from {args.namespace}", file=sys.stderr)
        elif cmd == "import":
            records = []
            with open(args.file, "rb") as fh:
                for line in fh:
                    if line.strip():
                        records.append(json.loads(line))
                    if len(records) % 10_000 == 0 and records:
                        print(f"\rread {len(records):,} records", end="", file=sys.stderr,
                              flush=True)  # fmt: skip
            print(f"\rread {len(records):,} records; importing (one transaction)...",
                  file=sys.stderr, flush=True)  # fmt: skip
            n = mem.import_records(records)
            print(f"imported {n:,} memory versions into {args.namespace}", file=sys.stderr)
        elif cmd == "demo":
            if args.story == "hawaii":
                from .demo_hawaii import run_hawaii

                run_hawaii(db, args.url, args.api_key, args.demo_namespace)
            else:
                from .demo import run_demo

                run_demo(db, args.demo_namespace)
        elif cmd == "events":
            _print(mem.events(args.stream, limit=args.limit, order=args.order))
        else:  # lineage
            _print(mem.lineage(args.answer_id))
    finally:
        db.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synapsedb", description="SynapseDB: memory for agents")
    parser.add_argument("--version", action="version", version=f"synapsedb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="print namespace statistics of a data directory")
    p.add_argument("--data", default="./synapse-data", help="data directory")
    p.add_argument("--namespace", help="one namespace (default: all)")
    p.set_defaults(func=_stats)
    p = sub.add_parser("serve", help="run the HTTP server on a data directory")
    p.add_argument("--data", default=os.environ.get("SYNAPSEDB_DATA", "./synapse-data"),
                   help="data directory (env SYNAPSEDB_DATA)")  # fmt: skip
    p.add_argument("--host", default=os.environ.get("SYNAPSEDB_HOST", "127.0.0.1"),
                   help="address to bind (env SYNAPSEDB_HOST)")  # fmt: skip
    p.add_argument("--port", type=int, default=int(os.environ.get("SYNAPSEDB_PORT", "7379")),
                   help="port (env SYNAPSEDB_PORT)")  # fmt: skip
    p.add_argument("--log-level", default=os.environ.get("SYNAPSEDB_LOG_LEVEL", "warning"),
                   choices=("debug", "info", "warning", "error", "critical"),
                   help="log level; info adds one access line per request "
                        "(env SYNAPSEDB_LOG_LEVEL)")  # fmt: skip
    p.add_argument("--log-format", default=os.environ.get("SYNAPSEDB_LOG_FORMAT", "json"),
                   choices=("json", "text"),
                   help="json: one object per line with request_id and trace_id "
                        "(env SYNAPSEDB_LOG_FORMAT)")  # fmt: skip
    p.add_argument("--otel-exporter", default=os.environ.get("SYNAPSEDB_OTEL_EXPORTER", "none"),
                   choices=("none", "otlp", "console"),
                   help="OpenTelemetry traces: none (default), otlp (HTTP/protobuf), console "
                        "(env SYNAPSEDB_OTEL_EXPORTER)")  # fmt: skip
    p.add_argument("--otel-endpoint", default=os.environ.get("SYNAPSEDB_OTEL_ENDPOINT"),
                   help="OTLP traces URL (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
                        "else http://localhost:4318/v1/traces)")  # fmt: skip
    p.add_argument("--loop", default=os.environ.get("SYNAPSEDB_LOOP", "asyncio"),
                   choices=("asyncio", "uvloop"),
                   help="event loop (env SYNAPSEDB_LOOP). asyncio is the default: under 64 "
                        "busy connections uvloop served some of them 10-20x later than the "
                        "median (bench/bench_http.py)")  # fmt: skip
    p.add_argument("--auth", default=os.environ.get("SYNAPSEDB_AUTH"), choices=("keys", "none"),
                   help="keys: every request needs an API key; none: open access (env "
                        "SYNAPSEDB_AUTH; default keys off loopback or when keys.db has a live "
                        "key, else none). Decided once, at start")  # fmt: skip
    p.add_argument("--insecure-open", action="store_true",
                   help="allow --auth none on a non-loopback address (something in front "
                        "must authenticate)")  # fmt: skip
    p.add_argument("--max-feeds-per-key", type=int,
                   default=int(os.environ.get("SYNAPSEDB_MAX_FEEDS_PER_KEY", "32")),
                   help="live feeds (Server-Sent Events) one API key may hold open at once "
                        "(env SYNAPSEDB_MAX_FEEDS_PER_KEY)")  # fmt: skip
    p.add_argument("--allowed-hosts", default=os.environ.get("SYNAPSEDB_ALLOWED_HOSTS"),
                   help="comma-separated Host names served besides a loopback server's own "
                        "(127.0.0.1, localhost, [::1]); any port; '*' for any host (env "
                        "SYNAPSEDB_ALLOWED_HOSTS)")  # fmt: skip
    p.add_argument("--max-connections", type=int,
                   default=int(os.environ.get("SYNAPSEDB_MAX_CONNECTIONS", "1024")),
                   help="open connections; past it a new one closes the longest-waiting "
                        "idle one, or, when all are busy, gets 503 (env "
                        "SYNAPSEDB_MAX_CONNECTIONS)")  # fmt: skip
    p.add_argument("--header-timeout", type=float,
                   default=float(os.environ.get("SYNAPSEDB_HEADER_TIMEOUT", "10")),
                   help="seconds a connection has to send a request's headers (env "
                        "SYNAPSEDB_HEADER_TIMEOUT)")  # fmt: skip
    p.add_argument("--body-timeout", type=float,
                   default=float(os.environ.get("SYNAPSEDB_BODY_TIMEOUT", "30")),
                   help="seconds to receive a request body, per 8 MiB; a slower body answers "
                        "408 (env SYNAPSEDB_BODY_TIMEOUT)")  # fmt: skip
    p.add_argument("--max-import-bytes", type=int,
                   default=int(os.environ.get("SYNAPSEDB_MAX_IMPORT_BYTES", str(256 << 20))),
                   help="largest import body in bytes (default 256 MiB; env "
                        "SYNAPSEDB_MAX_IMPORT_BYTES)")  # fmt: skip
    p.add_argument("--keep-alive-timeout", type=float,
                   default=float(os.environ.get("SYNAPSEDB_KEEP_ALIVE_TIMEOUT", "5")),
                   help="seconds an idle keep-alive connection stays open (env "
                        "SYNAPSEDB_KEEP_ALIVE_TIMEOUT)")  # fmt: skip
    p.add_argument("--blas-threads", type=int,
                   default=int(os.environ.get("SYNAPSEDB_BLAS_THREADS", "1")),
                   help="threads numpy's BLAS may use in this process (env "
                        "SYNAPSEDB_BLAS_THREADS; default 1: more spin on idle cores and slow "
                        "the embedder's threads on small machines)")  # fmt: skip
    p.add_argument("--proxy-namespace",
                   default=os.environ.get("SYNAPSEDB_PROXY_NAMESPACE", "default"),
                   help="namespace of the memory proxy's /v1/chat/completions and /v1/responses "
                        "(the upstream model: SYNAPSEDB_LLM_*; env SYNAPSEDB_PROXY_NAMESPACE)")  # fmt: skip
    p.add_argument("--tls-cert", default=os.environ.get("SYNAPSEDB_TLS_CERT"),
                   help="server certificate (PEM): serve HTTPS")  # fmt: skip
    p.add_argument("--tls-key", default=os.environ.get("SYNAPSEDB_TLS_KEY"),
                   help="server private key (PEM)")  # fmt: skip
    p.add_argument("--tls-client-ca", default=os.environ.get("SYNAPSEDB_TLS_CLIENT_CA"),
                   help="CA bundle: require client certificates signed by it (mutual TLS)")  # fmt: skip
    p.set_defaults(func=_serve)
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", default=os.environ.get("SYNAPSEDB_URL", "http://127.0.0.1:7379"),
                        help="server URL (env SYNAPSEDB_URL)")  # fmt: skip
    remote.add_argument("--api-key", default=os.environ.get("SYNAPSEDB_API_KEY"),
                        help="API key (env SYNAPSEDB_API_KEY)")  # fmt: skip
    remote.add_argument("-n", "--namespace", default=os.environ.get("SYNAPSEDB_NAMESPACE",
                        "default"), help="namespace (env SYNAPSEDB_NAMESPACE)")  # fmt: skip
    remote.add_argument("--agent", default=os.environ.get("SYNAPSEDB_AGENT"),
                        help="agent recorded as writer or asker (env SYNAPSEDB_AGENT)")  # fmt: skip
    p = sub.add_parser("write", parents=[remote], help="write a memory")
    p.add_argument("entity")
    p.add_argument("text")
    p.add_argument("--type", default="fact")
    p.add_argument("--salience", type=float)
    p.add_argument("--metadata", help="JSON object")
    p.set_defaults(func=_remote)
    p = sub.add_parser("query", parents=[remote], help="query by meaning and keywords")
    p.add_argument("text")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--entity")
    p.add_argument("--filter", help="JSON filter")
    p.add_argument("--as-of", dest="as_of", help="what was known then (system time)")
    p.add_argument("--valid-at", dest="valid_at", help="only memories true then (valid time)")
    p.add_argument("--json", action="store_true", help="the whole result as JSON")
    p.set_defaults(func=_remote)
    p = sub.add_parser("get", parents=[remote], help="a memory by id, or a fact: ENTITY KEY")
    p.add_argument("target")
    p.add_argument("key", nargs="?")
    p.add_argument("--as-of", dest="as_of")
    p.set_defaults(func=_remote)
    p = sub.add_parser("set", parents=[remote], help="set a KV fact: ENTITY KEY JSON-VALUE")
    p.add_argument("entity")
    p.add_argument("key")
    p.add_argument("value")
    p.set_defaults(func=_remote)
    p = sub.add_parser("events", parents=[remote], help="read a stream")
    p.add_argument("stream")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--order", choices=("asc", "desc"), default="asc")
    p.set_defaults(func=_remote)
    p = sub.add_parser("export", parents=[remote], help="a namespace as JSON lines (lossless)")
    p.add_argument("--out", help="file (default: standard output)")
    p.set_defaults(func=_remote)
    p = sub.add_parser(
        "import", parents=[remote], help="JSON lines from export, into an empty namespace"
    )
    p.add_argument("file")
    p.set_defaults(func=_remote)
    p = sub.add_parser("demo", parents=[remote], help="seed 000's refund story, three agents",
                       description="refund: seed 000's three agents sharing memory; hawaii: "
                       "seed 001's two sessions through the memory proxy (the server needs "
                       "SYNAPSEDB_LLM_BASE_URL)")  # fmt: skip
    p.add_argument("--story", choices=["refund", "hawaii"], default="refund")
    p.add_argument("--demo-namespace", help="namespace to use (default: a new demo-xxxxxx)")
    p.set_defaults(func=_remote)
    p = sub.add_parser("lineage", parents=[remote], help="what an answer was built on")
    p.add_argument("answer_id")
    p.set_defaults(func=_remote)
    from .cli_chat import add_parser as add_chat

    add_chat(sub, remote)
    from .cli_mcp import add_parser as add_mcp

    add_mcp(sub, remote)
    data = os.environ.get("SYNAPSEDB_DATA", "./synapse-data")
    p = sub.add_parser("keys", help="create, list and revoke API keys (stored as hashes)")
    ks = p.add_subparsers(dest="keys_command", required=True)
    c = ks.add_parser("create", help="create a key and print it once")
    c.add_argument("--data", default=data, help="data directory")
    c.add_argument("--tenant", help="tenant the key belongs to (not needed with --scopes "
                   "operator alone)")  # fmt: skip
    c.add_argument("--scopes", default="read,write",
                   help="read,write[,admin]; operator: every tenant's metrics")  # fmt: skip
    c.add_argument("--namespaces", help="comma-separated namespaces (default: all of the tenant)")
    c.add_argument("--rate", type=float, help="requests per second (default: unlimited)")
    c.add_argument("--agents", help="comma-separated agent names the key may act as (X-Agent; "
                   "default: any); with one, requests naming none act as it")  # fmt: skip
    c.set_defaults(func=_keys)
    c = ks.add_parser("list", help="list keys (never their secrets)")
    c.add_argument("--data", default=data, help="data directory")
    c.set_defaults(func=_keys)
    c = ks.add_parser("limit", help="a request rate for all of a tenant's keys together")
    c.add_argument("--tenant", required=True)
    c.add_argument("--rate", required=True, help="requests per second, or 'none' to lift it")
    c.add_argument("--data", default=data, help="data directory")
    c.set_defaults(func=_keys)
    c = ks.add_parser("revoke", help="revoke a key by id")
    c.add_argument("id")
    c.add_argument("--data", default=data, help="data directory")
    c.set_defaults(func=_keys)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SynapseError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"error [validation]: not valid JSON: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
