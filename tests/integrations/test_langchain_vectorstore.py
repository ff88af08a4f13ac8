"""SynapseVectorStore against langchain-tests' standard VectorStoreIntegrationTests (sync and
async), on an embedded database and through a real HTTP server.

The suite's own fixture contract: ``vectorstore`` yields an EMPTY store per test; it embeds
with langchain-core's ``DeterministicFakeEmbedding`` (6 dimensions, from a hash of the text).
Each test gets a fresh namespace of one database (or server) per class.

The suite's async tests are plain ``async def`` (langchain runs pytest-asyncio in auto mode);
our pytest-asyncio runs in strict mode, so the module marks every test ``asyncio`` and
silences, for this module only, the warning the mark raises on the suite's sync tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_tests.integration_tests import VectorStoreIntegrationTests

import synapsedb
from synapsedb.integrations.langchain import SynapseVectorStore
from tests.support.live_server import serve

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings(
        "ignore:The test <Function .*> is marked with '@pytest.mark.asyncio' but it is not an "
        "async function:pytest.PytestWarning"
    ),
]

_names = itertools.count()


def _open(path: Path) -> synapsedb.Database:
    return synapsedb.open(
        path, durability="os", llm=None, embedder=None, background_maintenance=False
    )


@pytest.fixture(scope="module")
def embedded_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[synapsedb.Database]:
    db = _open(tmp_path_factory.mktemp("lc-embedded"))
    yield db
    db.close()


@pytest.fixture(scope="module")
def remote_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from synapsedb.server import create_app

    db = _open(tmp_path_factory.mktemp("lc-served"))
    try:
        with serve(create_app(db)) as url:
            client = synapsedb.connect(url)
            yield client
            client.close()
    finally:
        db.close()


class TestSynapseVectorStoreEmbedded(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, embedded_db: synapsedb.Database) -> Iterator[SynapseVectorStore]:
        ns = embedded_db.namespace(f"lc-{next(_names)}")
        yield SynapseVectorStore(ns, self.get_embeddings())


class TestSynapseVectorStoreHTTP(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, remote_db: Any) -> Iterator[SynapseVectorStore]:
        ns = remote_db.namespace(f"lc-{next(_names)}")
        yield SynapseVectorStore(ns, self.get_embeddings())
