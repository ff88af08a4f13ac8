"""Real Redis and PostgreSQL servers on this machine for the conversation backends' tests.

- :func:`redis_server`: Debian's ``redis-server`` (``make test`` installs it when run as root) on
  a free loopback port, nothing saved to disk.
- :func:`postgres_server`: PostgreSQL from the PyPI package ``pgserver`` (its binaries ship in
  the wheel; a dev dependency), listening on a Unix socket only. As root it runs the server as
  a system user ``pgserver`` it creates, and opens the data directory's parents to it, so the
  directory is made with :func:`tempfile.mkdtemp`, away from pytest's own temporary tree.

A missing server skips the tests on a developer's machine, with the command that installs it,
and fails them under ``CI=true`` (or ``SYNAPSEDB_TEST_BACKENDS_REQUIRED=1``), where a skip would
hide that the backends went untested.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support.live_server import free_port

__all__ = ["postgres_server", "redis_server", "unavailable"]


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true" or os.environ.get("SYNAPSEDB_TEST_BACKENDS_REQUIRED") == "1":
        pytest.fail(f"{reason} (required here: CI=true or SYNAPSEDB_TEST_BACKENDS_REQUIRED=1)")
    pytest.skip(reason)


@contextlib.contextmanager
def redis_server(workdir: Path, *, start_timeout_s: float = 20.0) -> Iterator[str]:
    """A redis-server of its own; yields its URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        unavailable(
            "redis-server is not installed: apt-get install redis-server "
            "(make test installs it when run as root)"
        )
    import redis

    port = free_port()
    log = (workdir / "redis.log").open("wb")
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "redis-server did not start:\n" + (workdir / "redis.log").read_text()
                    ) from None
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server of its own (pgserver); yields a libpq connection URI."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns at pgserver's import that XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        unavailable("pgserver is not installed: pip install -e '.[dev]' (make install)")
    parent = Path(tempfile.mkdtemp(prefix="synapsedb-pg-"))
    server = pgserver.get_server(parent / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(parent, ignore_errors=True)
