from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.proxy_env import ProxyEnv, start_proxy


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyEnv]:
    """One memory proxy server per test module (tests/support/proxy_env.py)."""
    with start_proxy(tmp_path_factory.mktemp("proxy") / "d") as env:
        yield env


@pytest.fixture
def proxy(served: ProxyEnv) -> Iterator[ProxyEnv]:
    """The module's memory proxy, its upstream's request log cleared; every scripted reply
    pushed by the test must have been used."""
    served.upstream.requests.clear()
    yield served
    served.drain()
    assert served.upstream.pending == 0, "a scripted reply was not used"
