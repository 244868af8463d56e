"""The consumer-group coordinator: Kafka's classic rebalance protocol, in memory.

Group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) lives in this process only, as in
a Kafka coordinator whose state is rebuilt after a restart by the clients rejoining; committed
offsets are the embedded topic log's group offsets and survive everything.

States follow Kafka's ``GroupCoordinator``: Empty -> PreparingRebalance (joins collected until
every known member rejoined or the rebalance timeout passed) -> CompletingRebalance (the leader,
the first member to join, computes the assignment with its own client-side assignor and sends
it in SyncGroup) -> Stable. A member that misses heartbeats for its session timeout is removed
and the group rebalances; so do joins of new members and LeaveGroup.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum

from changefeed.server.kafka.errors import (
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

__all__ = ["Coordinator", "Group", "JoinResult"]

MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 1_800_000
#: Kafka's group.initial.rebalance.delay.ms is 3 s; a shorter delay keeps tests quick while
#: still letting consumers started together land in one generation.
INITIAL_REBALANCE_DELAY_S = 0.3


class State(Enum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_seen: float = field(default_factory=time.monotonic)
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[tuple[int, bytes]] | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    generation: int
    protocol: str
    leader: str
    member_id: str
    members: list[tuple[str, bytes]]  # only for the leader


@dataclass
class Group:
    group_id: str
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_task: asyncio.Task[None] | None = None


class Coordinator:
    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self._ids = itertools.count(1)
        self._reaper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._expire_loop())

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for g in self.groups.values():
            if g.rebalance_task is not None:
                g.rebalance_task.cancel()
            for m in g.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.cancel()

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    # -- JoinGroup ---------------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return JoinResult(INVALID_SESSION_TIMEOUT, -1, "", "", member_id, [])
        g = self.group(group_id)
        if g.members and (protocol_type != g.protocol_type or not self._common(g, protocols)):
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, -1, "", "", member_id, [])
        if member_id and member_id not in g.members:
            return JoinResult(UNKNOWN_MEMBER_ID, -1, "", "", member_id, [])
        if not member_id:
            member_id = f"{client_id or 'consumer'}-{next(self._ids)}-{uuid.uuid4().hex[:12]}"
        m = g.members.get(member_id)
        if m is None:
            m = Member(
                member_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
            )
            g.members[member_id] = m
        else:
            m.protocols = protocols
            m.session_timeout_ms = session_timeout_ms
            m.rebalance_timeout_ms = rebalance_timeout_ms
        m.last_seen = time.monotonic()
        g.protocol_type = protocol_type
        if m.join_future is not None and not m.join_future.done():
            m.join_future.cancel()
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        m.join_future = fut
        self._prepare_rebalance(g)
        self._maybe_complete_join(g)
        return await fut

    @staticmethod
    def _common(g: Group, protocols: list[tuple[str, bytes]]) -> set[str]:
        names = {p for p, _ in protocols}
        for m in g.members.values():
            names &= {p for p, _ in m.protocols}
        return names

    def _prepare_rebalance(self, g: Group) -> None:
        if g.state is State.PREPARING:
            return
        # Members waiting in SyncGroup of the old generation must rejoin.
        for m in g.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result((REBALANCE_IN_PROGRESS, b""))
        initial = g.state is State.EMPTY
        g.state = State.PREPARING
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0) / 1000
        g.rebalance_task = asyncio.get_running_loop().create_task(
            self._rebalance_deadline(g, timeout, initial)
        )

    async def _rebalance_deadline(self, g: Group, timeout: float, initial: bool) -> None:
        if initial:
            await asyncio.sleep(INITIAL_REBALANCE_DELAY_S)
            if g.state is State.PREPARING and self._all_joined(g):
                self._complete_join(g)
                return
            timeout = max(0.0, timeout - INITIAL_REBALANCE_DELAY_S)
        await asyncio.sleep(timeout)
        if g.state is not State.PREPARING:
            return
        # Members that did not rejoin in time are out.
        for mid in [mid for mid, m in g.members.items() if not self._joining(m)]:
            del g.members[mid]
        self._complete_join(g)

    @staticmethod
    def _joining(m: Member) -> bool:
        return m.join_future is not None and not m.join_future.done()

    def _all_joined(self, g: Group) -> bool:
        return all(self._joining(m) for m in g.members.values())

    def _maybe_complete_join(self, g: Group) -> None:
        task = g.rebalance_task
        # The first generation waits the initial delay so members started together join as one.
        if g.generation == 0 and task is not None and not task.done():
            return
        if g.state is State.PREPARING and self._all_joined(g):
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        if g.rebalance_task is not None and g.rebalance_task is not asyncio.current_task():
            g.rebalance_task.cancel()
        g.rebalance_task = None
        if not g.members:
            g.state = State.EMPTY
            g.generation += 1
            g.leader = ""
            return
        g.generation += 1
        g.state = State.COMPLETING
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.protocol = self._choose_protocol(g)
        members = [(m.member_id, dict(m.protocols).get(g.protocol, b"")) for m in g.members.values()]
        for m in g.members.values():
            m.assignment = b""
            fut = m.join_future
            if fut is not None and not fut.done():
                fut.set_result(
                    JoinResult(
                        NONE,
                        g.generation,
                        g.protocol,
                        g.leader,
                        m.member_id,
                        members if m.member_id == g.leader else [],
                    )
                )
            m.join_future = None
            m.last_seen = time.monotonic()

    @staticmethod
    def _choose_protocol(g: Group) -> str:
        # Kafka: each member votes for its most preferred protocol among those all support.
        common = set.intersection(*({p for p, _ in m.protocols} for m in g.members.values()))
        votes: dict[str, int] = {}
        for m in g.members.values():
            for p, _ in m.protocols:
                if p in common:
                    votes[p] = votes.get(p, 0) + 1
                    break
        first = g.members[g.leader].protocols
        order = [p for p, _ in first if p in common]
        return max(order, key=lambda p: (votes.get(p, 0), -order.index(p))) if order else ""

    # -- SyncGroup ---------------------------------------------------------------------------

    async def sync(
        self, group_id: str, generation: int, member_id: str, assignments: list[tuple[str, bytes]]
    ) -> tuple[int, bytes]:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID, b""
        if generation != g.generation:
            return ILLEGAL_GENERATION, b""
        m = g.members[member_id]
        m.last_seen = time.monotonic()
        if g.state is State.PREPARING:
            return REBALANCE_IN_PROGRESS, b""
        if g.state is State.STABLE:
            return NONE, m.assignment
        if member_id == g.leader:
            given = dict(assignments)
            for mm in g.members.values():
                mm.assignment = given.get(mm.member_id, b"")
            g.state = State.STABLE
            for mm in g.members.values():
                if mm.sync_future is not None and not mm.sync_future.done():
                    mm.sync_future.set_result((NONE, mm.assignment))
                mm.sync_future = None
            return NONE, m.assignment
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        return await fut

    # -- Heartbeat, LeaveGroup, expiry ---------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        g.members[member_id].last_seen = time.monotonic()
        if g.state is State.PREPARING:
            return REBALANCE_IN_PROGRESS
        if generation != g.generation:
            return ILLEGAL_GENERATION
        return NONE

    def leave(self, group_id: str, member_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        self._remove(g, member_id)
        return NONE

    def _remove(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id)
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinResult(UNKNOWN_MEMBER_ID, -1, "", "", member_id, []))
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result((UNKNOWN_MEMBER_ID, b""))
        if not g.members:
            if g.rebalance_task is not None:
                g.rebalance_task.cancel()
                g.rebalance_task = None
            g.state = State.EMPTY
            g.leader = ""
            return
        if g.state is State.PREPARING:
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g)

    def check_generation(self, group_id: str, generation: int, member_id: str) -> int:
        """For OffsetCommit: -1 generation means a consumer outside group management."""
        if generation < 0:
            return NONE
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return ILLEGAL_GENERATION
        if g.state is State.COMPLETING:
            # As Kafka: members may still commit while the group prepares a rebalance (before
            # they rejoin), not between the join and the new assignment.
            return REBALANCE_IN_PROGRESS
        g.members[member_id].last_seen = time.monotonic()
        return NONE

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            for g in list(self.groups.values()):
                for mid, m in list(g.members.items()):
                    if self._joining(m):
                        continue  # waiting in JoinGroup counts as alive
                    if now - m.last_seen > m.session_timeout_ms / 1000:
                        self._remove(g, mid)
