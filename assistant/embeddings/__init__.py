"""Text embeddings behind the Embedder protocol."""

from assistant.embeddings.base import Embedder, create_embedder

__all__ = ["Embedder", "create_embedder"]
