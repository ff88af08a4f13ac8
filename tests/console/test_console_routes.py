"""The console's routes without a browser: /ui and its files (headers, fixed set, no external
or inline code), /v1/whoami in both auth modes, and that every API path the console's scripts
call is a route of the app."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

import synapsedb
from synapsedb.server import create_app
from synapsedb.server.keys import KeyStore
from synapsedb.server.routes.console import CSP

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "src" / "synapsedb" / "server" / "console"


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[TestClient, KeyStore]]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    keys = KeyStore(tmp_path / "d")
    with TestClient(create_app(db, keys)) as client:
        yield client, keys
    db.close()


@pytest.fixture
def open_client(tmp_path: Path) -> Iterator[TestClient]:
    db = synapsedb.open(
        tmp_path / "d", durability="os", embedder=None, background_maintenance=False
    )
    with TestClient(create_app(db)) as client:
        yield client
    db.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_page_loads_without_a_key_and_keeps_to_itself(
    keyed: tuple[TestClient, KeyStore],
) -> None:
    client, _ = keyed
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert csp == CSP
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    again = client.get("/ui", headers={"If-None-Match": page.headers["etag"]})
    assert again.status_code == 304 and again.headers["content-security-policy"] == CSP
    assert client.get("/v1/namespaces").status_code == 401  # the data still needs a key


def test_every_file_the_page_loads_is_served_with_its_type(open_client: TestClient) -> None:
    html = open_client.get("/ui").text
    wanted = set(re.findall(r'(?:src|href)="ui/([^"]+)"', html))
    for js in FILES.glob("*.js"):  # and every module the scripts import
        wanted |= set(re.findall(r'from "\./([^"]+)"', js.read_text()))
    assert {"app.js", "app.css", "api.js", "dom.js", "browse.js"} <= wanted
    types = {".js": "text/javascript", ".css": "text/css"}
    for name in wanted:
        r = open_client.get(f"/ui/{name}")
        assert r.status_code == 200, name
        assert r.headers["content-type"].startswith(types[Path(name).suffix]), name
        assert r.headers["content-security-policy"] == CSP
        assert (FILES / name).read_bytes() == r.content


@pytest.mark.parametrize(
    "name", ["nope.js", "..%2F..%2Fapp.py", "%2e%2e", "app.py", "__init__.py", "APP.JS"]
)
def test_only_the_shipped_files_are_served(open_client: TestClient, name: str) -> None:
    r = open_client.get(f"/ui/{name}")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_no_inline_script_no_external_code_no_markup_from_strings() -> None:
    """Offline and CSP-clean by construction: no inline script or handler, nothing fetched
    from another origin, and no script turns a string into markup or code."""
    html = (FILES / "index.html").read_text()
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html))
    assert not re.search(r"\son[a-z]+=", html) and "style=" not in html
    for path in FILES.iterdir():
        text = path.read_text().replace('"http://www.w3.org/2000/svg"', "")  # a name, not a URL
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), path.name
        if path.suffix == ".js":
            for bad in (
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "new Function",
                "document.write",
                "localStorage",
            ):
                assert bad not in text, (path.name, bad)


def test_every_api_path_the_console_calls_is_a_route(open_client: TestClient) -> None:
    templates = [r.path for r in open_client.app.routes if isinstance(r, Route)]  # type: ignore[attr-defined]
    patterns = [re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", t) + "$") for t in templates]
    called: set[str] = set()
    for js in FILES.glob("*.js"):
        text = js.read_text()
        called |= {
            "/v1/namespaces/ns" + p for p in re.findall(r'nsPath\([^,]+, [`"]([^`"]+)', text)
        }
        called |= set(re.findall(r'get\("(/v1/[^"]+)"', text))
    called = {re.sub(r"\$\{[^}]+\}", "x", p) for p in called}
    assert len(called) >= 14, called
    for path in called:
        assert any(p.match(path) for p in patterns), path


def test_whoami_in_none_mode(open_client: TestClient) -> None:
    assert open_client.get("/v1/whoami").json() == {
        "auth": "none",
        "key": None,
        "tenant": None,
        "scopes": ["read", "write", "admin"],
        "namespaces": None,
        "agents": None,
    }


def test_whoami_tells_each_key_its_own_scopes_and_never_the_secret(
    keyed: tuple[TestClient, KeyStore],
) -> None:
    client, keys = keyed
    assert client.get("/v1/whoami").status_code == 401
    assert (
        client.get("/v1/whoami", headers=bearer("sdb_aaaaaaaaaaaa_" + "x" * 30)).status_code == 401
    )
    reader, reader_token = keys.create("acme", ["read"], ["support"], agents=["intake", "triage"])
    other_key, admin_token = keys.create("globex", ["read", "write", "admin"])
    got = client.get("/v1/whoami", headers=bearer(reader_token))
    assert got.status_code == 200
    assert got.json() == {
        "auth": "keys",
        "key": reader.id,
        "tenant": "acme",
        "scopes": ["read"],
        "namespaces": ["support"],
        "agents": ["intake", "triage"],
    }
    assert reader_token.split("_", 2)[2] not in got.text  # the secret may hold "_" itself
    other = client.get("/v1/whoami", headers=bearer(admin_token)).json()
    assert other["key"] == other_key.id and other["tenant"] == "globex"
    assert other["scopes"] == ["read", "write", "admin"]
    assert other["namespaces"] is None and other["agents"] is None
    keys.revoke(reader.id)
    gone = client.get("/v1/whoami", headers=bearer(reader_token))
    assert gone.status_code == 401 and gone.json()["error"]["code"] == "unauthorized"


def test_the_console_ships_in_the_wheel() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["synapsedb"]
    for path in FILES.iterdir():
        rel = path.relative_to(ROOT / "src" / "synapsedb").as_posix()
        assert any(Path(rel).match(p) for p in patterns), rel


def test_whoami_answers_match_its_openapi_schema(keyed: tuple[TestClient, KeyStore]) -> None:
    """The document's WhoAmI is the answer's exact shape (unknown fields refused), both modes."""
    import msgspec

    from synapsedb.server.openapi import WhoAmI

    client, keys = keyed
    _, token = keys.create("acme", ["read"], ["support"], agents=["intake"])
    got = msgspec.json.decode(client.get("/v1/whoami", headers=bearer(token)).content, type=WhoAmI)
    assert got.namespaces == ["support"] and got.key is not None
    doc = client.get("/openapi.json").json()
    answer = doc["paths"]["/v1/whoami"]["get"]["responses"]["200"]["content"]
    assert answer["application/json"]["schema"] == {"$ref": "#/components/schemas/WhoAmI"}
    assert set(doc["components"]["schemas"]["WhoAmI"]["properties"]) == set(
        WhoAmI.__struct_fields__
    )


def test_whoami_in_none_mode_matches_its_openapi_schema(open_client: TestClient) -> None:
    import msgspec

    from synapsedb.server.openapi import WhoAmI

    got = msgspec.json.decode(open_client.get("/v1/whoami").content, type=WhoAmI)
    assert got.auth == "none" and got.key is None and got.namespaces is None
