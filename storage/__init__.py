"""The store (SQLite, or PostgreSQL for replicas): the only place SQL lives."""

from storage.base import LeaseLost
from storage.store import Counts, EventInsert, Lease, PendingWork, Store

__all__ = ["Counts", "EventInsert", "Lease", "LeaseLost", "PendingWork", "Store"]
