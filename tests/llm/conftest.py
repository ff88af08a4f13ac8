"""Tests against a real local model (``make test-llm``; docs/llm.md, "A real local model").

Every test under tests/llm is marked ``llm`` here, so the default run (``-m 'not slow and not
llm'``) never collects one into ``make test``. The server (tests/support/local_llm.py) starts
once per session, on the first test that asks for it:

- ``local_llm_settings``: ``LLMSettings`` for it (base URL and model), for ChatClient,
  AsyncChatClient or anything built on them.
- ``local_llm``: the running server itself (its base URL, model file, log).
- ``llm_meter``: a :class:`~tests.support.llm_meter.Meter`, whose transports record each
  request's latency and token usage; the table is printed at the end of the run (measured,
  never asserted).

Without .venv-llm the tests are skipped with a message saying how to create it, except under
``make test-llm`` (``SYNAPSEDB_TEST_LLM_REQUIRED=1``), where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synapsedb.config import LLMSettings
from tests.support.llm_meter import Meter
from tests.support.local_llm import LocalLLM, LocalLLMUnavailableError, serve

HERE = Path(__file__).resolve().parent
REQUIRED_ENV = "SYNAPSEDB_TEST_LLM_REQUIRED"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.llm)


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLM]:
    try:
        with serve() as server:
            yield server
    except LocalLLMUnavailableError as exc:
        if os.environ.get(REQUIRED_ENV):
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def local_llm_settings(local_llm: LocalLLM) -> LLMSettings:
    # A CPU model on a busy 2-core machine can take a minute for a few hundred tokens; the
    # default 60 s would time out and retry a generation the server is still running.
    return local_llm.settings(timeout_s=300.0)


METER = pytest.StashKey[Meter]()


@pytest.fixture(scope="session")
def llm_meter(pytestconfig: pytest.Config) -> Meter:
    return pytestconfig.stash.setdefault(METER, Meter())


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    meter = config.stash.get(METER, None)
    if meter is not None and meter.calls:
        terminalreporter.section("local model: latency and tokens per second (measured)")
        for line in meter.report():
            terminalreporter.write_line(line)
