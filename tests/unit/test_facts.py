from __future__ import annotations

import pytest

from synapsedb import ManualClock, Namespace, NotFoundError, ValidationError, VersionConflictError


def test_set_get_versions_and_history(mem: Namespace, clock: ManualClock) -> None:
    f1 = mem.set("user:4321", "order", {"id": 1458, "status": "requested"})
    t1 = clock.now_us() / 1e6
    clock.advance(1)
    f2 = mem.set("user:4321", "order", {"id": 1458, "status": "refunded"}, agent="resolution")
    assert (f1.version, f2.version) == (1, 2)
    assert mem.get("user:4321", "order").value["status"] == "refunded"
    assert mem.get("user:4321", "order", as_of=t1).value["status"] == "requested"
    hist = mem.history("user:4321", "order")
    assert [(h.version, h.agent) for h in hist] == [(1, "intake"), (2, "resolution")]


def test_compare_and_set(mem: Namespace) -> None:
    assert mem.set("e", "k", 1, if_version=0).version == 1  # create-only
    with pytest.raises(VersionConflictError) as err:
        mem.set("e", "k", 2, if_version=0)
    assert err.value.actual == 1
    assert mem.set("e", "k", 2, if_version=1).value == 2
    with pytest.raises(VersionConflictError):
        mem.set("e", "k", 3, if_version=1)
    assert mem.get("e", "k").value == 2


def test_delete_then_set_again(mem: Namespace) -> None:
    mem.set("e", "k", "v")
    tomb = mem.delete("e", "k")
    assert tomb.deleted
    with pytest.raises(NotFoundError):
        mem.get("e", "k")
    with pytest.raises(NotFoundError):
        mem.delete("e", "k")
    again = mem.set("e", "k", "w", if_version=0)  # absent again, so create-only succeeds
    assert again.version == 3
    assert [h.deleted for h in mem.history("e", "k")] == [False, True, False]


def test_facts_lists_current_values_sorted(mem: Namespace) -> None:
    mem.set("e", "b", 2)
    mem.set("e", "a", 1)
    mem.set("e", "c", 3)
    mem.delete("e", "c")
    assert [(f.key, f.value) for f in mem.facts("e")] == [("a", 1), ("b", 2)]


def test_fact_ttl(mem: Namespace, clock: ManualClock) -> None:
    mem.set("e", "otp", "123456", ttl=30)
    t = clock.now_us() / 1e6
    clock.advance(31)
    with pytest.raises(NotFoundError):
        mem.get("e", "otp")
    assert mem.get("e", "otp", as_of=t + 1).value == "123456"
    assert mem.set("e", "otp", "999", if_version=0).value == "999"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (float("nan"), "value"),
        ({"a": float("inf")}, "value.a"),
        ({1: "x"}, "value"),
        ({"s": {1, 2}}, "value.s"),
        (2**70, "value"),
        (object(), "value"),
    ],
)
def test_non_json_values_are_rejected(mem: Namespace, value: object, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.set("e", "k", value)
    assert err.value.field == field
    with pytest.raises(NotFoundError):
        mem.get("e", "k")


def test_value_size_limit(mem: Namespace) -> None:
    with pytest.raises(ValidationError) as err:
        mem.set("e", "k", "x" * 70_000)
    assert err.value.details["limit"] == 64 * 1024
