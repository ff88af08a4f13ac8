"""Sharded placement: the share of the namespaces this process owns among the live processes on
one PostgreSQL schema (setting ``placement = "sharded"``; docs/deploy.md).

Each share (``storage.postgres_shards.shard_of``) is assigned by rendezvous hashing: of the
live members, the one with the highest ``hash(address, share)`` (:func:`assign`). When a
member joins or dies, only the shares whose highest score changes move: about 1/n of them.

A :class:`Placement` joins the ``members`` table with a lease, and renews it every third of
``lease_s``. At each renewal it reads who is alive and who owns what, then:

- gives each share it owns that is now assigned to another live member to that member, and
  drops that share's namespaces from memory (:meth:`EngineCore` is told: ``lost``);
- takes each share assigned to it that nobody live owns (the owner died, left, or there was
  none yet), then makes that share's stored namespaces pending (``gained``): each loads at its
  first request, reading every row an earlier owner committed (the storage fences commits:
  postgres_shards.py).

While a share assigned to this process is still held by another live one (it joined a moment
ago: the holder hands it over at its own next renewal), it looks every :data:`SETTLE_S`
instead, so that it serves the share soon after it is handed over.

Between renewals, :meth:`owner_of` answers from the last reading: None for a namespace of
this process, else the owner's address ("" while nobody owns its share). A process whose own
lease may have run out (no renewal for ``lease_s``) owns nothing until it renews again, so it
never serves a namespace another process may have taken.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

from ..errors import NotOwnerError, SynapseError
from ..storage.postgres_shards import SHARDS, Placed, shard_of

__all__ = ["Placement", "ShardedStorage", "assign"]

log = logging.getLogger("synapsedb.placement")

LOOK_EVERY_S = 0.2  # the most often a request makes this process read the owners again
SETTLE_S = 0.5  # how often a process looks while shares assigned to it are held elsewhere


class ShardedStorage(Protocol):
    """What placement needs of the storage (PostgresStorage: postgres_shards.Membership)."""

    def fence(self, address: str, incarnation: str) -> None: ...
    def join(self, address: str, incarnation: str, lease_s: float) -> None: ...
    def renew(self, address: str, incarnation: str, lease_s: float) -> bool: ...
    def placed(self) -> Placed: ...
    def take(self, address: str, incarnation: str, shards: Sequence[int]) -> list[int]: ...
    def give(
        self, address: str, incarnation: str, shards: Sequence[int], to: tuple[str, str] | None
    ) -> list[int]: ...
    def leave(self, address: str, incarnation: str) -> None: ...


def _score(address: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{address}\x00{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(addresses: Sequence[str]) -> list[str | None]:
    """The member each share is assigned to (rendezvous hashing); None without members."""
    if not addresses:
        return [None] * SHARDS
    ranked = sorted(set(addresses))
    return [max(ranked, key=lambda a: _score(a, shard)) for shard in range(SHARDS)]


class Placement:
    """This process's share, kept by a thread that renews the lease and moves shares.

    ``gained(shards)`` is called with shares just taken, before requests for them are served
    here; ``lost(shards)`` with shares just handed over (or whose ownership lapsed), after
    requests for them stopped being served here."""

    def __init__(
        self,
        storage: ShardedStorage,
        address: str,
        lease_s: float,
        *,
        gained: Callable[[set[int]], None],
        lost: Callable[[set[int]], None],
    ) -> None:
        self.storage = storage
        self.address = address
        self.incarnation = uuid.uuid4().hex
        self.lease_s = float(lease_s)
        self._gained = gained
        self._lost = lost
        self._owned: frozenset[int] = frozenset()
        self._owners: list[str] = [""] * SHARDS  # each share's owner's address ("": nobody)
        self._valid_until = 0.0  # time.monotonic() until which our lease surely holds
        self._looked = 0.0  # time.monotonic() of the last look()
        self._lock = threading.Lock()  # one refresh at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        # shares rendezvous assigns here that another live process still holds (it hands
        # them over at its next renewal): look every SETTLE_S meanwhile, not every lease_s/3
        self._unsettled = False
        self._thread: threading.Thread | None = None
        self.moves = 0  # shares taken or given by this process (a metric)

    # -- answers -----------------------------------------------------------------------------

    def owner_of(self, ns: str) -> str | None:
        """None: this process owns ``ns``; else its owner's address ("": nobody yet)."""
        shard = shard_of(ns)
        if shard in self._owned:
            if time.monotonic() < self._valid_until:
                return None
            return ""  # our lease may have run out: another process may hold it by now
        return self._owners[shard]

    def check(self, ns: str) -> None:
        """Raise NotOwnerError unless this process owns ``ns``."""
        owner = self.owner_of(ns)
        if owner is not None:
            raise self.not_owner(ns, owner)

    def not_owner(self, ns: str, owner: str) -> NotOwnerError:
        self._wake.set()  # (someone thought it was here: look again soon)
        if owner:
            return NotOwnerError(
                f"namespace {ns!r} is served by another process ({owner})", owner=owner,
                retry_after=1,
            )  # fmt: skip
        return NotOwnerError(
            f"namespace {ns!r} is moving between processes (its owner is being replaced); "
            "retry in a moment",
            retry_after=1,
        )

    def look(self) -> None:
        """Read who owns what again, now (at most every :data:`LOOK_EVERY_S`): a request for
        a namespace whose owner this process does not know (its share just moved) asks this
        before it answers ``not_owner``. Moves nothing, except that a share another process
        has just handed to this one is taken up at once (a full :meth:`refresh`), instead of
        at the next renewal."""
        now = time.monotonic()
        if now - self._looked < LOOK_EVERY_S:
            return
        self._looked = now
        placed = self.storage.placed()
        handed = [s for s, (o, i) in enumerate(placed.owners)
                  if o == self.address and i == self.incarnation and s not in self._owned]  # fmt: skip
        if handed:
            self.refresh()
            return
        live = {addr: i for addr, i, alive in placed.members if alive}
        owners = [o if o is not None and live.get(o) == i else "" for o, i in placed.owners]
        for s in self._owned:  # what this process owns, it knows best
            owners[s] = self.address
        self._owners = owners

    @property
    def owned(self) -> frozenset[int]:
        return self._owned

    @property
    def unsettled(self) -> bool:
        """Shares assigned to this process are still held by another live one (it then looks
        every :data:`SETTLE_S`)."""
        return self._unsettled

    # -- the lease and the shares -----------------------------------------------------------

    def start(self) -> None:
        """Join, take this process's share (synchronously: ready to serve when this returns),
        and start renewing."""
        self.storage.fence(self.address, self.incarnation)
        self.storage.join(self.address, self.incarnation, self.lease_s)
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="synapsedb-placement", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(min(SETTLE_S, self.lease_s / 3) if self._unsettled
                            else self.lease_s / 3)  # fmt: skip
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.refresh()
            except SynapseError as exc:  # PostgreSQL unreachable: our lease runs out meanwhile
                log.warning("renewing this process's lease failed (%s); retrying", exc.message)
                self._stop.wait(min(1.0, self.lease_s / 10))
            except Exception:
                log.exception("placement refresh failed; retrying")
                self._stop.wait(min(1.0, self.lease_s / 10))

    def refresh(self) -> None:
        """Renew the lease, read the tables, give and take shares (see the module)."""
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        storage, me, inc = self.storage, self.address, self.incarnation
        before = self._owned
        started = time.monotonic()
        if not storage.renew(me, inc, self.lease_s):
            # our lease ran out and someone may have taken our shares: join again; the
            # shares this incarnation still owns are ours, the others were taken
            log.warning("this process's lease had run out; joining again")
            storage.join(me, inc, self.lease_s)
        self._valid_until = started + self.lease_s * 0.9
        placed = storage.placed()
        live = {addr: i for addr, i, alive in placed.members if alive}
        live[me] = inc
        target = assign(list(live))
        mine = {s for s, (o, i) in enumerate(placed.owners) if o == me and i == inc}
        owners = [o if o is not None and live.get(o) == i else "" for o, i in placed.owners]
        give: dict[str, list[int]] = {}
        for s in sorted(mine):
            t = target[s]
            if t is not None and t != me:
                give.setdefault(t, []).append(s)
        leaving = {s for shards in give.values() for s in shards}
        if leaving:  # stop serving them here first: requests go to the new owner
            for to, shards in give.items():
                for s in shards:
                    self._owners[s] = to
            self._owned = frozenset(self._owned - leaving)
        given: set[int] = set()
        for to, shards in give.items():
            try:
                moved = storage.give(me, inc, shards, (to, live[to]))
            except SynapseError as exc:  # (a lock wait ran out) they stay ours: next time
                log.warning("handing shares to %s failed (%s)", to, exc.message)
                moved = []
            for s in moved:
                owners[s] = to
            given.update(moved)
        want = [s for s in range(SHARDS) if target[s] == me and s not in mine and not owners[s]]
        taken: set[int] = set()
        if want:
            try:
                taken = set(storage.take(me, inc, want))
            except SynapseError as exc:
                log.warning("taking shares over failed (%s)", exc.message)
        owned = (mine - given) | taken
        self._unsettled = any(target[s] == me and s not in owned for s in range(SHARDS))
        for s in owned:
            owners[s] = me
        self.moves += len(given) + len(taken)
        gained = set(owned - before)
        if gained:
            self._gained(gained)  # their namespaces pending before requests reach them
        lost = set(before - owned)
        self._owners = owners
        self._owned = frozenset(owned)
        if lost:
            self._lost(lost)
        if given or taken:
            log.info("placement: took %d shares, gave %d; %d owned, %d live processes",
                     len(taken), len(given), len(owned), len(live))  # fmt: skip

    def close(self) -> None:
        """Stop renewing, give every share up and leave (the others take them at once)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            self._owned = frozenset()
            try:
                self.storage.leave(self.address, self.incarnation)
            except SynapseError as exc:  # the others take the shares when the lease ends
                log.warning("leaving the members failed (%s)", exc.message)
