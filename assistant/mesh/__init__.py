"""Mesh inference: chat requests forwarded to peer instances (their OpenAI-compatible endpoint), chosen by
health and latency, bounded per peer, with the local engine as the fallback (docs/mesh.md)."""

from assistant.mesh.local import ChatLocalEngine, LocalEngine
from assistant.mesh.service import Mesh, build_mesh
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
    Usage,
)

__all__ = ["LOCAL", "Attempt", "ChatLocalEngine", "LocalEngine", "Mesh", "MeshAnswer", "MeshRequest", "Outcome",
           "PeerFailedError", "PeerStatus", "PeerTimeoutError", "Reply", "Usage", "build_mesh"]
