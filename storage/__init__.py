"""SQLite store: the only place SQL lives."""

from storage.store import Counts, EventInsert, Lease, PendingWork, Store

__all__ = ["Counts", "EventInsert", "Lease", "PendingWork", "Store"]
