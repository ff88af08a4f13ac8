"""The official ``langgraph-checkpoint-conformance`` suite against SynapseSaver, embedded and
over HTTP: every base and extended capability must pass (the report is printed; ``pytest -s``
shows it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from synapsedb.integrations.langgraph import SynapseSaver

from .conftest import Backend


@pytest.mark.asyncio
async def test_the_conformance_suite_passes_in_full(backend: Backend) -> None:
    @checkpointer_test(name=f"SynapseSaver ({backend.kind})")
    async def saver() -> AsyncIterator[SynapseSaver]:
        yield SynapseSaver(backend.db, "conformance")

    report = await validate(saver)
    report.print_report()
    failures = {name: r.failures for name, r in report.results.items() if r.tests_failed}
    assert failures == {}
    # every capability, the optional ones included, was detected and ran with no skip
    assert {c.value for c in ALL_CAPABILITIES} == set(report.results)
    assert all(
        r.detected and r.passed is True and r.tests_skipped == 0 for r in report.results.values()
    )
    assert sum(r.tests_passed for r in report.results.values()) == 81
    assert report.passed_all_base() and report.conformance_level() == "FULL"
