"""``entities()`` in pages: prefix, after, limit, and entities whose memories are all cold."""

from __future__ import annotations

import pytest

from synapsedb import ManualClock, Namespace, NotFoundError, ValidationError


def test_pages_walk_every_entity_once_in_name_order(mem: Namespace) -> None:
    names = [f"user:{i:03d}" for i in range(25)] + ["order:1", "order:2"]
    for i, name in enumerate(names):
        if i % 2:
            mem.set(name, "plan", "pro")
        else:
            mem.write(name, f"note {i}")
    walked: list[str] = []
    after = None
    while True:
        page = mem.entities(limit=4, after=after)
        assert len(page) <= 4
        walked += page
        if len(page) < 4:
            break
        after = page[-1]
    assert walked == sorted(names)
    assert mem.entities(prefix="order:") == ["order:1", "order:2"]
    assert mem.entities(prefix="user:", after="user:020", limit=3) == [
        "user:021",
        "user:022",
        "user:023",
    ]
    assert mem.entities(prefix="nobody:") == []


def test_a_page_skips_entities_invisible_at_as_of(mem: Namespace, clock: ManualClock) -> None:
    mem.write("a", "first")
    t0 = clock.now_us() / 1e6
    clock.advance(1)
    mem.write("b", "second")
    gone = mem.write("c", "third")
    mem.forget(gone.id)
    assert mem.entities(limit=1, after="a") == ["b"]
    assert mem.entities(limit=5, as_of=t0) == ["a"]
    assert mem.entities() == ["a", "b"]


def test_entities_whose_memories_are_all_cold_are_listed(mem: Namespace) -> None:
    for i in range(6):
        mem.write(f"user:{i}", f"note {i} about a parcel")
    mem.configure(max_hot=2)
    mem.maintain()
    assert mem.stats().cold_memories == 4
    assert mem.entities() == [f"user:{i}" for i in range(6)]
    assert mem.entities(limit=2, after="user:1") == ["user:2", "user:3"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"limit": True}, "limit"),
        ({"prefix": 3}, "prefix"),
        ({"after": ["x"]}, "after"),
    ],
)
def test_bad_page_arguments_name_the_field(mem: Namespace, kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.entities(**kwargs)
    assert err.value.details.get("field") == field


def test_memories_page_with_before_walks_newest_first_once(
    mem: Namespace, clock: ManualClock
) -> None:
    ids = []
    for i in range(11):
        clock.advance(1)
        ids.append(mem.write("user:1", f"note {i}").id)
    clock.advance(1)
    cold_first = mem.write("user:2", "other entity").id
    walked: list[str] = []
    before = None
    while True:
        page = mem.memories("user:1", limit=3, before=before)
        walked += [m.id for m in page]
        if len(page) < 3:
            break
        before = page[-1].id
    assert walked == ids[::-1]
    mem.forget(ids[5])  # a cursor whose memory was forgotten still marks its place
    assert [m.id for m in mem.memories("user:1", limit=2, before=ids[5])] == [ids[4], ids[3]]
    assert [m.id for m in mem.memories(limit=2)] == [cold_first, ids[10]]


def test_a_before_cursor_that_never_existed_is_named(mem: Namespace) -> None:
    mem.write("user:1", "something")
    with pytest.raises(NotFoundError) as err:
        mem.memories(before="m_nope")
    assert err.value.details.get("field") == "before"
    with pytest.raises(ValidationError) as bad:
        mem.memories(before="")
    assert bad.value.details.get("field") == "before"
