"""``streams()`` in pages: prefix, after and limit, as ``entities()`` pages."""

from __future__ import annotations

import pytest

from synapsedb import ManualClock, Namespace, ValidationError


def test_pages_walk_every_stream_once_in_name_order(mem: Namespace) -> None:
    names = [f"chat:{i:03d}" for i in range(25)] + ["desk:b", "desk:a"]
    for i, name in enumerate(names):
        mem.append(f"user:{i}", f"event {i}", stream=name, searchable=False)
    assert mem.streams() == sorted(names)  # no limit: every name, as before
    walked: list[str] = []
    after = None
    while True:
        page = mem.streams(limit=4, after=after)
        assert len(page) <= 4
        walked += page
        if len(page) < 4:
            break
        after = page[-1]
    assert walked == sorted(names)
    assert mem.streams(prefix="desk:") == ["desk:a", "desk:b"]
    assert mem.streams(prefix="chat:", after="chat:020", limit=3) == [
        "chat:021",
        "chat:022",
        "chat:023",
    ]
    tail = [f"chat:{i:03d}" for i in range(21, 25)] + ["desk:a", "desk:b"]
    assert mem.streams(after="chat:0205") == tail  # after need not be a stream's name
    assert mem.streams(prefix="nobody:") == []
    assert mem.streams(after="desk:b") == []


def test_a_page_skips_streams_invisible_at_as_of_or_erased(
    mem: Namespace, clock: ManualClock
) -> None:
    mem.append("user:1", "hello", stream="a", searchable=False)
    t0 = clock.now_us() / 1e6
    clock.advance(1)
    mem.append("user:2", "hi", stream="b", searchable=False)
    mem.append("user:3", "secret", stream="c", searchable=False)
    mem.append("user:4", "later", stream="d", searchable=False)
    mem.forget(entity="user:3", purge=True)  # c's only event erased: c is not listed
    assert mem.streams(limit=2, after="a") == ["b", "d"]  # the page is filled past c
    assert mem.streams(limit=5, as_of=t0) == ["a"]
    assert mem.streams(prefix="c") == []
    assert mem.streams() == ["a", "b", "d"]


def test_an_empty_namespace_has_no_streams_still_checks_its_arguments(mem: Namespace) -> None:
    assert mem.streams(limit=3) == []
    with pytest.raises(ValidationError):
        mem.streams(limit=0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": 2.0}, "limit"),
        ({"prefix": 3}, "prefix"),
        ({"prefix": b"a"}, "prefix"),
        ({"after": ["x"]}, "after"),
    ],
)
def test_bad_page_arguments_name_the_field(mem: Namespace, kwargs: dict, field: str) -> None:
    mem.append("user:1", "hello", stream="a")
    with pytest.raises(ValidationError) as err:
        mem.streams(**kwargs)
    assert err.value.details.get("field") == field
