"""SQLite store: the only place SQL lives."""

from storage.store import Counts, EventInsert, Store

__all__ = ["Counts", "EventInsert", "Store"]
