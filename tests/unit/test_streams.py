from __future__ import annotations

import pytest

from synapsedb import ManualClock, Namespace, ValidationError


def _ids(events: list) -> list[str]:
    return [e.id for e in events]


def test_ids_are_monotonic_even_within_one_millisecond(mem: Namespace) -> None:
    evs = [mem.append("user:1", f"event {i}") for i in range(5)]  # manual clock: same ms
    keys = [tuple(map(int, e.id.split("-"))) for e in evs]
    assert keys == sorted(keys) and len(set(keys)) == 5
    assert keys[0][1] == 0 and keys[4][1] == 4
    assert _ids(mem.events("user:1")) == _ids(evs)
    assert _ids(mem.events("user:1", order="desc", limit=2)) == [evs[4].id, evs[3].id]


def test_ids_survive_a_clock_going_backwards(mem: Namespace, clock: ManualClock) -> None:
    a = mem.append("s", "a")
    clock.set(clock.now_us() - 10_000_000)
    b = mem.append("s", "b")
    assert tuple(map(int, b.id.split("-"))) > tuple(map(int, a.id.split("-")))
    assert b.recorded_at >= a.recorded_at


def test_read_by_id_range_and_after(mem: Namespace, clock: ManualClock) -> None:
    evs = []
    for i in range(6):
        evs.append(mem.append("s", f"e{i}"))
        clock.advance(0.01)
    assert _ids(mem.events("s", start=evs[1].id, end=evs[3].id)) == _ids(evs[1:4])
    assert _ids(mem.events("s", after=evs[3].id)) == _ids(evs[4:])
    ms = evs[2].id.split("-")[0]
    assert _ids(mem.events("s", start=ms, end=ms)) == [evs[2].id]


def test_read_by_event_time_range(mem: Namespace) -> None:
    for day in (1, 2, 3, 4):
        mem.append("s", {"content": f"day {day}", "ts": f"2025-10-0{day}T12:00:00Z"})
    got = mem.events("s", since="2025-10-02", until="2025-10-04")
    assert [e.content for e in got] == ["day 2", "day 3"]


def test_named_stream_data_and_unsearchable_events(mem: Namespace) -> None:
    ev = mem.append(
        "user:1",
        {"content": "doc search ran", "data": {"query": "refund policy", "hits": 3}},
        stream="searches",
        searchable=False,
    )
    assert ev.stream == "searches" and ev.entity == "user:1" and ev.memory_id is None
    assert mem.events("searches")[0].data == {"query": "refund policy", "hits": 3}
    assert mem.events("user:1") == []
    assert mem.memories("user:1") == []


def test_streams_as_of(mem: Namespace, clock: ManualClock) -> None:
    a = mem.append("s", "a")
    t = clock.now_us() / 1e6
    clock.advance(1)
    mem.append("s", "b")
    assert _ids(mem.events("s", as_of=t)) == [a.id]
    assert mem.streams() == ["s"]
    assert mem.streams(as_of=t - 1) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"start": "abc"}, "start"),
        ({"after": "1-2-3"}, "after"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"since": "yesterday"}, "since"),
    ],
)
def test_bad_stream_reads(mem: Namespace, kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        mem.events("s", **kwargs)
    assert err.value.field == field


def test_unknown_event_field(mem: Namespace) -> None:
    with pytest.raises(ValidationError) as err:
        mem.append("s", {"content": "x", "colour": "red"})
    assert err.value.field == "colour"
    assert mem.events("s") == []


def test_a_limited_read_from_either_end_matches_the_full_read(
    mem: Namespace, clock: ManualClock
) -> None:
    """``order="desc"`` with a limit reads the tail from the end; it must give what the
    whole stream read newest-first and cut would: bounds, ``after`` and ``as_of`` included."""
    ids = []
    for i in range(40):
        clock.advance(1)
        ids.append(mem.append("u", f"turn {i}", stream="chat", searchable=False).id)
    middle = clock.now_us() / 1e6
    for i in range(40, 60):
        clock.advance(1)
        ids.append(mem.append("u", f"turn {i}", stream="chat", searchable=False).id)
    cases = [
        dict(limit=5),
        dict(limit=100),
        dict(limit=7, after=ids[50]),
        dict(limit=3, start=ids[10], end=ids[20]),
        dict(limit=4, as_of=middle),
        dict(limit=25, after=ids[45], as_of=middle),
    ]
    for kw in cases:
        limit = kw.pop("limit")
        full = mem.events("chat", order="desc", limit=1000, **kw)
        assert mem.events("chat", order="desc", limit=limit, **kw) == full[:limit], kw
        assert mem.events("chat", limit=limit, **kw) == full[::-1][:limit], kw
    assert [e.content for e in mem.events("chat", order="desc", limit=2)] == ["turn 59", "turn 58"]
