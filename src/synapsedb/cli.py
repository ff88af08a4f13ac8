"""The ``synapsedb`` command line: a thin shell over the library."""

from __future__ import annotations

import argparse
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

# how long a busy thread keeps the GIL from one waiting for it, in `synapsedb serve` (see serve)
SWITCH_INTERVAL_S = 0.001


def _stats(args: argparse.Namespace) -> int:
    from .cli_format import print_json

    db: Any = connect(args.url, api_key=args.api_key) if args.url else open_db(args.data)
    with db:
        names = [args.namespace] if args.namespace else db.namespaces()
        print_json({n: db.namespace(n).stats() for n in names})
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
    # 2-core box burned a core and doubled text query latency (docs/benchmarks.md)
    threadpool_limits(limits=args.blas_threads, user_api="blas")
    # requests first: a thread waiting for the GIL takes it from a busy one after 1 ms, not
    # Python's 5 ms. The server's background threads (namespaces loading after a start, the
    # keyword index catching up) are pure Python for seconds; a request hands the GIL over
    # several times (event loop, worker thread, graph search) and used to wait 5 ms each time
    # (vector query p99 during a 100,000-row keyword catch-up: 21-29 ms, 11 ms at 1 ms)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    tracing = Tracing(args.otel_exporter, endpoint=args.otel_endpoint)
    try:
        settings = Settings.from_env()
        llm = LLMSettings.from_env()
        check_namespace(args.proxy_namespace)
        if args.advertise:
            settings = settings.replace(advertise_url=args.advertise)
        if settings.placement == "sharded" and not settings.advertise_url:
            if args.host in ("0.0.0.0", "::", ""):
                raise ValidationError(
                    "--advertise: with sharded placement, give the address the other "
                    f"processes reach this one at (it binds {args.host or 'every address'})",
                    field="advertise_url",
                )
            host = f"[{args.host}]" if ":" in args.host else args.host
            scheme = "https" if args.tls_cert else "http"
            settings = settings.replace(advertise_url=f"{scheme}://{host}:{args.port}")
    except ValidationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    db = open_db(args.data, storage=args.storage, settings=settings, llm=llm)
    try:
        mode = "API keys required" if auth == "keys" else "open access (--auth none)"
        scheme = "https" if args.tls_cert else "http"
        if args.tls_client_ca:
            mode += ", client certificates required"
        if tracing.enabled:
            mode += f", traces to {args.otel_exporter}"
        served = args.data if args.storage is None else f"{args.data} ({db.core.storage.where})"
        print(f"synapsedb {__version__}: serving {served} on "
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


def _demo(args: argparse.Namespace) -> int:
    with connect(args.url, api_key=args.api_key) as db:
        if args.story == "hawaii":
            from .demo_hawaii import run_hawaii

            run_hawaii(db, args.url, args.api_key, args.demo_namespace)
        else:
            from .demo import run_demo

            run_demo(db, args.demo_namespace)
    return 0


class Help(argparse.RawDescriptionHelpFormatter):
    """Help that keeps the examples of an epilog on their own lines."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synapsedb", description="SynapseDB: memory for agents")
    parser.add_argument("--version", action="version", version=f"synapsedb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("stats", help="namespace statistics (JSON) of a data directory or a "
                       "server", formatter_class=Help, epilog="examples:\n  synapsedb stats "
                       "--data ./synapse-data\n  synapsedb stats --url http://127.0.0.1:7379 "
                       "--namespace acme")  # fmt: skip
    p.add_argument("--data", default="./synapse-data", help="data directory")
    p.add_argument("--url", help="a server instead of a data directory")
    p.add_argument("--api-key", default=os.environ.get("SYNAPSEDB_API_KEY"),
                   help="API key, with --url (env SYNAPSEDB_API_KEY)")  # fmt: skip
    p.add_argument("--namespace", help="one namespace (default: all)")
    p.set_defaults(func=_stats)
    p = sub.add_parser("serve", help="run the HTTP server on a data directory",
                       formatter_class=Help, epilog="example:\n  synapsedb serve --data "
                       "./synapse-data --host 0.0.0.0 --auth keys")  # fmt: skip
    p.add_argument("--data", default=os.environ.get("SYNAPSEDB_DATA", "./synapse-data"),
                   help="data directory (env SYNAPSEDB_DATA)")  # fmt: skip
    p.add_argument("--storage", default=os.environ.get("SYNAPSEDB_STORAGE") or None,
                   help="where the rows live: SQLite in the data directory (default), or "
                        "postgresql://user@host:5432/db?schema=name; the data directory then "
                        "holds the lock and saved indexes (env SYNAPSEDB_STORAGE)")  # fmt: skip
    p.add_argument("--host", default=os.environ.get("SYNAPSEDB_HOST", "127.0.0.1"),
                   help="address to bind (env SYNAPSEDB_HOST)")  # fmt: skip
    p.add_argument("--port", type=int, default=int(os.environ.get("SYNAPSEDB_PORT", "7379")),
                   help="port (env SYNAPSEDB_PORT)")  # fmt: skip
    p.add_argument("--advertise", default=None,
                   help="sharded placement (SYNAPSEDB_PLACEMENT=sharded): this process's "
                        "address for the others, e.g. http://10.0.0.5:7379 (env "
                        "SYNAPSEDB_ADVERTISE_URL; default http://<host>:<port>)")  # fmt: skip
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
    from .cli_data import add_parsers

    remote = add_parsers(sub, Help)
    p = sub.add_parser("demo", parents=[remote], help="the refund story: three support agents share memory",
                       description="refund: three support agents sharing memory; hawaii: "
                       "two chat sessions through the memory proxy (the server needs "
                       "SYNAPSEDB_LLM_BASE_URL)", formatter_class=Help,
                       epilog="example:\n  synapsedb demo --story refund")  # fmt: skip
    p.add_argument("--story", choices=["refund", "hawaii"], default="refund")
    p.add_argument("--demo-namespace", help="namespace to use (default: a new demo-xxxxxx)")
    p.set_defaults(func=_demo)
    from .cli_chat import add_parser as add_chat

    add_chat(sub, remote)
    from .cli_mcp import add_parser as add_mcp

    add_mcp(sub, remote)
    from .cli_models import add_parser as add_models

    add_models(sub, Help)
    data = os.environ.get("SYNAPSEDB_DATA", "./synapse-data")
    p = sub.add_parser("keys", help="create, list and revoke API keys (stored as hashes)")
    ks = p.add_subparsers(dest="keys_command", required=True)
    c = ks.add_parser("create", help="create a key and print it once", formatter_class=Help,
                      epilog="example:\n  synapsedb keys create --data ./synapse-data --tenant acme --scopes read,write")  # fmt: skip
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
    c = ks.add_parser("list", help="list keys (never their secrets)", formatter_class=Help,
                      epilog="example:\n  synapsedb keys list --data ./synapse-data")  # fmt: skip
    c.add_argument("--data", default=data, help="data directory")
    c.set_defaults(func=_keys)
    c = ks.add_parser("limit", help="a request rate for all of a tenant's keys together", formatter_class=Help,
                      epilog="example:\n  synapsedb keys limit --data ./synapse-data --tenant acme --rate 500")  # fmt: skip
    c.add_argument("--tenant", required=True)
    c.add_argument("--rate", required=True, help="requests per second, or 'none' to lift it")
    c.add_argument("--data", default=data, help="data directory")
    c.set_defaults(func=_keys)
    c = ks.add_parser("revoke", help="revoke a key by id", formatter_class=Help,
                      epilog="example:\n  synapsedb keys revoke --data ./synapse-data KEY_ID")  # fmt: skip
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
    except BrokenPipeError:  # the reader went away (| head): nothing more to say, and
        # nothing more may be flushed to the closed pipe at exit (the Python docs' recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
