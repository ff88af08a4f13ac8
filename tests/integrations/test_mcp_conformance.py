"""The MCP protocol conformance suite (``npx @modelcontextprotocol/conformance server``) against
``/mcp`` on a real server, with a baseline of expected failures: the suite exits non-zero on
a failure not in the baseline and on a baseline entry that now passes, so this test fails in
both directions.

Pinned to 0.1.12: 0.1.14 and later import ``globSync`` from ``fs``, which needs node 22, and
the machines here have node 20. Skipped, saying why, without npx or when npm cannot fetch the
package. The suite sends no API key, so the server runs in ``none`` mode (loopback, Host check
on, as ``synapsedb serve`` runs it); tenant isolation is tested in test_mcp_http.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.middleware import LOOPBACK_HOSTS
from tests.support.live_server import serve

pytest.importorskip("mcp", reason="the mcp extra is not installed")

PACKAGE = "@modelcontextprotocol/conformance@0.1.12"
REFERENCE = (
    "calls a tool only the suite's reference server has (test_simple_text, "
    "test_image_content, ...): SynapseDB's tools are its memory operations"
)
EXPECTED_FAILURES = {
    "logging-set-level": "no logging capability (deprecated in MCP 2026-07-28, SEP-2577); "
    "the server logs to its own JSON log",
    "completion-complete": "no completion capability: no prompts, and resource template "
    "arguments are namespaces and entities the client already has",
    "tools-call-simple-text": REFERENCE,
    "tools-call-image": REFERENCE,
    "tools-call-audio": REFERENCE,
    "tools-call-embedded-resource": REFERENCE,
    "tools-call-mixed-content": REFERENCE,
    "tools-call-with-logging": REFERENCE,
    "tools-call-error": REFERENCE + " (tool errors are tested in test_mcp_stdio/http)",
    "tools-call-with-progress": REFERENCE,
    "tools-call-sampling": REFERENCE + "; no tool asks the client's model anything",
    "tools-call-elicitation": REFERENCE + "; no tool asks the user anything",
    "elicitation-sep1034-defaults": REFERENCE,
    "elicitation-sep1330-enums": REFERENCE,
    "resources-read-text": "reads the reference server's test://static-text; SynapseDB's "
    "resources are synapsedb://<namespace>/entities[/<entity>]",
    "resources-read-binary": "reads the reference server's test://static-binary",
    "resources-templates-read": "reads the reference server's test://template/{id}/data",
    "resources-subscribe": "no subscriptions: the endpoint is stateless (no session outlives "
    "a request); changes are followed through GET .../changes",
    "resources-unsubscribe": "no subscriptions (as resources-subscribe)",
    "server-sse-multiple-streams": "stateless endpoint: no session id, so no GET streams to "
    "multiply (the suite reports a WARNING, which its baseline counts as a failure)",
    "prompts-list": "no prompts",
    "prompts-get-simple": "no prompts",
    "prompts-get-with-args": "no prompts",
    "prompts-get-embedded-resource": "no prompts",
    "prompts-get-with-image": "no prompts",
}
MUST_PASS = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "dns-rebinding-protection",
)
OFFLINE = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ETIMEDOUT",
    "ECONNRESET",
    "network",
    "404 Not Found",
    "E404",
)


def test_the_protocol_conformance_suite(tmp_path: Path) -> None:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (node and npm run the MCP conformance suite)")
    baseline = tmp_path / "expected-failures.yml"
    baseline.write_text("server:\n" + "".join(f"  - {name}\n" for name in EXPECTED_FAILURES))
    out = tmp_path / "results"
    with synapsedb.open(tmp_path / "d", embedder=None, llm=None, durability="os") as db:
        db.namespace("default").write("user:1", "a memory for resources/list")
        with serve(create_app(db, allowed_hosts=LOOPBACK_HOSTS)) as url:
            run = subprocess.run(
                [
                    npx,
                    "-y",
                    PACKAGE,
                    "server",
                    "--url",
                    f"{url}/mcp",
                    "--expected-failures",
                    str(baseline),
                    "-o",
                    str(out),
                ],
                capture_output=True,
                text=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
    log = run.stdout + run.stderr
    if run.returncode != 0 and not out.exists() and any(word in log for word in OFFLINE):
        pytest.skip(f"npm could not fetch {PACKAGE} (no network?): {log.strip()[-300:]}")
    assert run.returncode == 0, log[-4000:]
    results: dict[str, list[dict[str, object]]] = {}
    for checks in out.glob("server-*/checks.json"):
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name.removeprefix("server-"))
        results[name] = json.loads(checks.read_text())
    for name in MUST_PASS:
        statuses = {c["status"] for c in results[name]} - {"INFO"}
        assert statuses == {"SUCCESS"}, (name, results[name])
    assert set(EXPECTED_FAILURES) <= set(results)
