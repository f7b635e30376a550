"""The store (SQLite, or PostgreSQL for replicas): the only place SQL lives."""

from storage.base import LeaseLost
from storage.store import Counts, EventInsert, Lease, ModelUsage, PendingWork, Store, TokensSpent

__all__ = [
    "Counts",
    "EventInsert",
    "Lease",
    "LeaseLost",
    "ModelUsage",
    "PendingWork",
    "Store",
    "TokensSpent",
]
