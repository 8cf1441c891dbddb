"""Storage: the SQLite system of record (with sqlite-vec) and the DuckDB analytics file."""

from assistant.storage.analytics import Analytics
from assistant.storage.db import Database

__all__ = ["Analytics", "Database"]
