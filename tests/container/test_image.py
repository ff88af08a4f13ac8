"""The server image (make image) runs: its entrypoint and command, with the environment its
configuration declares, started from the mounted image under chroot (running a container
needs cgroups that not every sandbox grants; ``podman mount`` plus ``chroot`` runs the same
files). As deploy/compose.yaml runs it: on PostgreSQL (a real server, pgserver, on this
machine's loopback), with an API key made by the image's own ``keys create``; then
``/readyz``, one write and one query over HTTP.

Run by ``make image-test`` (marker ``container``: it needs the image, podman and root).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from tests.support.backend_servers import postgres_server
from tests.support.live_server import free_port

pytestmark = pytest.mark.container

IMAGE = os.environ.get("SYNAPSEDB_TEST_IMAGE", "localhost/synapsedb:0.1.0")
PODMAN = ["podman", "--cgroup-manager=cgroupfs"]


def podman(*args: str) -> str:
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stderr[-3000:])
    return done.stdout.strip()


@pytest.fixture(scope="module")
def rootfs() -> Iterator[tuple[Path, dict]]:
    """A container of the image, its root filesystem mounted (with /proc and /dev bound in),
    and the image's configuration (Entrypoint, Cmd, Env)."""
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.fail("the image test needs podman and root (make image-test)")
    config = json.loads(podman("image", "inspect", IMAGE))[0]["Config"]
    cid = podman("create", IMAGE)
    mounts: list[Path] = []
    try:
        root = Path(podman("mount", cid))
        for name in ("proc", "dev"):
            (root / name).mkdir(exist_ok=True)
            subprocess.run(["mount", "--bind", f"/{name}", str(root / name)], check=True)
            mounts.append(root / name)
        yield root, config
    finally:
        for path in reversed(mounts):
            subprocess.run(["umount", "--lazy", str(path)], check=False)
        subprocess.run([*PODMAN, "umount", cid], capture_output=True, check=False)
        subprocess.run([*PODMAN, "rm", "-f", cid], capture_output=True, check=False)


def image_env(config: dict, **extra: str) -> dict[str, str]:
    env = dict(item.split("=", 1) for item in config.get("Env") or [])
    return {**env, **extra}


@contextlib.contextmanager
def socket_dir_in(root: Path, dsn: str) -> Iterator[None]:
    """pgserver listens on a unix socket: its folder, bound at the same path in the root."""
    host = parse_qs(urlparse(dsn).query).get("host", [""])[0]
    if not host.startswith("/"):
        yield
        return
    target = root / host.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", host, str(target)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "--lazy", str(target)], check=False)


def test_the_image_serves_on_postgresql(rootfs: tuple[Path, dict], tmp_path: Path) -> None:
    root, config = rootfs
    entry = [*config["Entrypoint"], *config["Cmd"]]
    assert entry == ["synapsedb", "serve"]
    port = free_port()
    with postgres_server() as dsn, socket_dir_in(root, dsn):
        # bound to loopback here: the chroot shares this machine's network (the image's own
        # SYNAPSEDB_HOST is 0.0.0.0, for a container's network)
        env = image_env(
            config,
            SYNAPSEDB_STORAGE=dsn,
            SYNAPSEDB_HOST="127.0.0.1",
            SYNAPSEDB_PORT=str(port),
            SYNAPSEDB_AUTH="keys",
            HOME="/root",
        )
        assert env["SYNAPSEDB_DATA"] == "/data" and env["SYNAPSEDB_HOST"] == "127.0.0.1"
        made = subprocess.run(
            [
                "chroot",
                str(root),
                "/usr/bin/env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                config["Entrypoint"][0],
                "keys",
                "create",
                "--tenant",
                "acme",
                "--scopes",
                "read,write",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr[-3000:]
        token = json.loads(made.stdout)["key"]
        log = (tmp_path / "serve.log").open("w")
        proc = subprocess.Popen(
            [
                "chroot",
                str(root),
                "/usr/bin/env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                *entry,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-4000:]
                assert time.monotonic() < deadline, "the image's server was not ready in 180 s"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                        break
                time.sleep(0.5)
            auth = {"Authorization": f"Bearer {token}"}
            assert httpx.get(f"{url}/v1/namespaces/support/entities").status_code == 401
            wrote = httpx.post(
                f"{url}/v1/namespaces/support/memories",
                headers=auth,
                json={"entity": "user:4321", "content": "Refund requested for order #1458"},
            )
            assert wrote.status_code == 201, wrote.text
            found = httpx.post(
                f"{url}/v1/namespaces/support/query",
                headers=auth,
                json={"text": "user:4321 refund status", "k": 1},
            )
            assert found.status_code == 200, found.text
            assert found.json()["hits"][0]["content"] == "Refund requested for order #1458"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        served = (tmp_path / "serve.log").read_text()
        assert "(database postgres on " in served, served[-2000:]  # it said where it keeps data
