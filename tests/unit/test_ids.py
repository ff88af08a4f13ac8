"""Memory and query ids: unpredictable, unique and time-sortable (issue 10, second hostile pass,
F13).

The 80 random bits of every ULID used to come from one process-wide Mersenne Twister: a tenant
could recover its state from about 250 of its own ids, then predict and count the ids made for
other tenants (their write and query volume). They now come from the OS's CSPRNG.
"""

from __future__ import annotations

import ast
import inspect
import os
import threading
from pathlib import Path

import pytest

from synapsedb import ids
from synapsedb.ids import new_memory_id

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CROCKFORD = set(ALPHABET)
NOW_US = 1_700_000_000_000_000


def _decode(ulid: str) -> int:
    return sum(ALPHABET.index(c) << (5 * (25 - i)) for i, c in enumerate(ulid))


def test_the_module_does_not_use_the_random_module() -> None:
    tree = ast.parse(inspect.getsource(ids))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "random" not in imported
    assert not any(type(v).__module__ == "random" for v in vars(ids).values())


def test_the_random_part_is_the_operating_system_s_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id's 80 random bits are bytes read from os.urandom, in order, none reused."""
    drawn: list[bytes] = []

    def urandom(n: int) -> bytes:
        out = bytes((len(drawn) * 7 + i) % 256 for i in range(n))
        drawn.append(out)
        return out

    monkeypatch.setattr(ids.os, "urandom", urandom)
    ids.reset_random_pool()
    made = [new_memory_id(NOW_US) for _ in range(300)]  # more than one batch
    ids.reset_random_pool()
    stream = b"".join(drawn)
    assert len(drawn) >= 2
    for n, ulid in enumerate(made):
        value = _decode(ulid)
        assert value >> 80 == NOW_US // 1000
        assert value & ((1 << 80) - 1) == int.from_bytes(stream[10 * n : 10 * n + 10])


def test_ids_stay_unique_and_sortable_over_a_burst() -> None:
    """8 threads x 5,000 ids over a few milliseconds: no duplicate, and ids of a later
    millisecond always sort after those of an earlier one."""
    made: list[list[tuple[int, str]]] = [[] for _ in range(8)]

    def burst(out: list[tuple[int, str]]) -> None:
        for i in range(5_000):
            ms = NOW_US + (i // 1_000) * 1_000
            out.append((ms, new_memory_id(ms)))

    threads = [threading.Thread(target=burst, args=(out,)) for out in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [pair for out in made for pair in out]
    assert len({u for _, u in every}) == len(every) == 40_000
    assert all(len(u) == 26 and set(u) <= CROCKFORD for _, u in every)
    by_id = sorted(every, key=lambda pair: pair[1])
    assert [ms for ms, _ in by_id] == sorted(ms for ms, _ in every)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_ids_than_its_parent(tmp_path: Path) -> None:
    new_memory_id(NOW_US)  # the parent has bytes in hand when it forks
    out = tmp_path / "child"
    pid = os.fork()
    if pid == 0:  # the child
        try:
            out.write_text("\n".join(new_memory_id(NOW_US) for _ in range(50)))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    parent = {new_memory_id(NOW_US) for _ in range(50)}
    assert len(out.read_text().split()) == 50
    assert not parent & set(out.read_text().split())
