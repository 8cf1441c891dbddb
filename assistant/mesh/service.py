"""Mesh inference: a chat request forwarded to a peer instance, or answered by the local engine.

One request (:meth:`Mesh.infer`):

1. ``local_only``, or no peer configured: the local engine answers.
2. Peers whose health is older than ``mesh.health_interval_secs`` (and that are not marked down) are
   probed, concurrently, each within ``mesh.health_timeout_secs``; a failed probe marks the peer down
   for ``mesh.down_secs`` (it is neither probed nor chosen meanwhile).
3. The available peers are ranked (:func:`assistant.mesh.peers.ranked`: the preferred ``peer`` first,
   then the latency EWMA); the first one with a free slot of its ``max_concurrency`` is chosen (a full
   peer is skipped at once, never waited for).
4. The request is forwarded to it (:class:`assistant.mesh.client.PeerClient`) within
   ``mesh.timeout_secs``. An answer updates the peer's latency EWMA; a failure or a timeout marks it
   down. Only one peer is tried per request, so a request costs at most one timeout before its fallback.
5. When no peer could serve or the forward failed: with ``allow_fallback`` (the default) the local
   engine answers and ``fallback_reason`` says why; without it the request fails: 504
   ``GATEWAY_TIMEOUT`` for a timeout, 502 ``UPSTREAM_ERROR`` for a failed forward, 503
   ``SERVICE_UNAVAILABLE`` when no peer was available (down, unhealthy or full).

The answer names who served it (``served_by``: the peer's name or ``"local"``), the latency and the
route (each peer considered and what happened to it). Peers' answers are data: text returned to the
caller, never executed; no tools are sent to a peer and no tool call of a peer's is taken. Nothing is
stored. HTTP runs on the mesh's own worker threads (sized for every peer's slots and probes), so a slow
peer never holds the event loop or the server's default thread pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from uuid import UUID

import httpx

from assistant.chat.service import ChatService
from assistant.config import Settings
from assistant.config.extended import MeshSettings
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.mesh.client import ForwardError, PeerClient
from assistant.mesh.local import ChatLocalEngine, LocalEngine
from assistant.mesh.peers import PeerState, ranked
from assistant.mesh.types import (
    LOCAL,
    Attempt,
    MeshAnswer,
    MeshRequest,
    Outcome,
    PeerFailedError,
    PeerStatus,
    PeerTimeoutError,
    Reply,
)

log = logging.getLogger("assistant.mesh")


class Mesh:
    """The peers of ``settings.peers`` and the local engine. ``transport`` replaces the HTTP transport
    (tests pass ``httpx.MockTransport``); ``clock`` gives epoch seconds (down periods, probe ages)."""

    def __init__(self, settings: MeshSettings, local: LocalEngine, *, transport: httpx.BaseTransport | None = None,
                 clock: Callable[[], float] = time.time):
        self.settings = settings
        self.local = local
        self.clock = clock
        self.peers = {p.name: PeerState(p, settings.latency_alpha) for p in settings.peers}
        self.client = PeerClient(max_answer_bytes=settings.max_answer_bytes, transport=transport)
        workers = sum(p.max_concurrency for p in settings.peers) + len(settings.peers)
        self.executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="mesh")

    # -- health ---------------------------------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> set[str]:
        """Probe the peers whose health is stale (``force``: every peer, down ones too); the names probed."""
        now = self.clock()
        stale = [p for p in self.peers.values() if force or p.needs_probe(now, self.settings.health_interval_secs)]
        if not stale:
            return set()
        timeout = self.settings.health_timeout_secs
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(self.executor, self.client.probe, p.config, timeout) for p in stale),
            return_exceptions=True)
        now = self.clock()
        for peer, result in zip(stale, results, strict=True):
            error = f"health probe raised {type(result).__name__}: {result}"[:300] \
                if isinstance(result, BaseException) else result
            peer.probed(now, error, self.settings.down_secs)
            if error is not None:
                log.warning("mesh peer %s is down for %g s: %s", peer.name, self.settings.down_secs, error)
        return {p.name for p in stale}

    def status(self) -> list[PeerStatus]:
        """Every peer's health, down period, latency EWMA and forwards in flight (no probe)."""
        now = self.clock()
        return [p.status(now) for p in self.peers.values()]

    # -- a request ------------------------------------------------------------------------------

    async def infer(self, user_id: UUID | str, request: MeshRequest) -> MeshAnswer:
        """The answer of a peer or of the local engine (see the module's docstring)."""
        start = time.perf_counter()
        if request.peer is not None and request.peer not in self.peers:
            known = ", ".join(self.peers) or "none configured"
            error = f"unknown peer {request.peer!r} (mesh.peers: {known})"
            raise ValidationFailed(f"peer: {error}", [{"field": "peer", "error": error}])
        if request.local_only:
            return await self._local(user_id, request, start, "local_only was requested", ())
        if not self.peers:
            return await self._local(user_id, request, start, "no peers are configured (mesh.peers)", ())
        probed = await self.refresh()
        chosen, route = self._choose(request.peer, probed)
        if chosen is None:
            reason = "no peer can serve: " + "; ".join(f"{a.peer} {a.outcome.value} ({a.detail})" for a in route)
            if not request.allow_fallback:
                raise ServiceUnavailableError(reason, {"route": [a.as_dict() for a in route]})
            return await self._local(user_id, request, start, reason, tuple(route))
        served, attempt = await self._forward(chosen, request)
        route = [attempt if a.peer == chosen.name else a for a in route]
        if served is not None:
            log.info("mesh request for %s served by %s in %.0f ms", user_id, chosen.name, attempt.latency_ms or 0)
            return MeshAnswer(served, chosen.name, _ms_since(start), None, tuple(route))
        reason = f"peer {chosen.name!r} {'timed out' if attempt.outcome is Outcome.TIMEOUT else 'failed'}: " \
                 f"{attempt.detail}"
        if not request.allow_fallback:
            error = PeerTimeoutError if attempt.outcome is Outcome.TIMEOUT else PeerFailedError
            raise error(reason, {"peer": chosen.name, "route": [a.as_dict() for a in route]})
        return await self._local(user_id, request, start, reason, tuple(route))

    def _choose(self, prefer: str | None, probed: set[str]) -> tuple[PeerState | None, list[Attempt]]:
        """The peer to forward to, holding one of its slots (or None), and the route: every peer with
        its outcome so far (the chosen one ``served`` until the forward says otherwise)."""
        now = self.clock()
        route: list[Attempt] = []
        for peer in self.peers.values():
            if peer.available(now):
                continue
            outcome = Outcome.UNHEALTHY if peer.name in probed else Outcome.DOWN
            until = f", down for {peer.down_until - now:.0f} s more" if peer.is_down(now) else ""
            route.append(Attempt(peer.name, outcome, f"{peer.last_error or 'not healthy'}{until}"))
        chosen: PeerState | None = None
        for peer in ranked(self.peers.values(), now, prefer):
            if chosen is not None:
                route.append(Attempt(peer.name, Outcome.NOT_TRIED, "another peer was chosen"))
            elif peer.try_acquire():
                chosen = peer
                route.append(Attempt(peer.name, Outcome.SERVED))
            else:
                route.append(Attempt(peer.name, Outcome.FULL,
                                     f"{peer.config.max_concurrency} of {peer.config.max_concurrency} slots in flight"))
        return chosen, route

    async def _forward(self, peer: PeerState, request: MeshRequest) -> tuple[Reply | None, Attempt]:
        """Forward to ``peer`` (a slot already held; released when the worker thread ends, so a peer
        still working on a timed-out request keeps that slot). The reply, or None and why."""
        timeout = self.settings.timeout_secs
        began = time.perf_counter()
        try:
            job = self.executor.submit(self.client.forward, peer.config, request, timeout)
        except RuntimeError:  # the executor is shut down: the services are closing
            peer.release()
            raise ServiceUnavailableError("the mesh is closing") from None
        job.add_done_callback(lambda _: peer.release())
        try:
            reply = await asyncio.wait_for(asyncio.wrap_future(job), timeout)
        except (TimeoutError, ForwardError) as exc:
            timed_out = isinstance(exc, TimeoutError) or exc.timed_out
            detail = f"no answer within mesh.timeout_secs ({timeout:g} s)" if timed_out else str(exc)
            outcome = Outcome.TIMEOUT if timed_out else Outcome.FAILED
        except Exception as exc:  # noqa: BLE001 - any failure of a forward falls back; it is logged
            log.exception("mesh forward to %s raised", peer.name)
            detail, outcome = f"{type(exc).__name__}: {exc}"[:300], Outcome.FAILED
        else:
            latency = _ms_since(began)
            peer.succeeded(latency)
            return reply, Attempt(peer.name, Outcome.SERVED, "", latency)
        peer.failed_forward(self.clock(), detail, self.settings.down_secs)
        log.warning("mesh forward to %s %s (down for %g s): %s", peer.name, outcome.value, self.settings.down_secs,
                    detail)
        return None, Attempt(peer.name, outcome, detail, _ms_since(began))

    async def _local(self, user_id: UUID | str, request: MeshRequest, start: float, reason: str,
                     route: tuple[Attempt, ...]) -> MeshAnswer:
        reply = await self.local.complete(user_id, request)
        log.info("mesh request for %s served locally: %s", user_id, reason)
        return MeshAnswer(reply, LOCAL, _ms_since(start), reason, route)

    def close(self) -> None:
        """Stop the worker threads (a forward under way ends at its timeout) and close the connections."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def build_mesh(settings: Settings, chat: ChatService) -> Mesh | None:
    """The mesh while ``mesh.enabled``, with the chat service's engine as the local one; else None."""
    if not settings.mesh.enabled:
        return None
    return Mesh(settings.mesh, ChatLocalEngine(chat))
