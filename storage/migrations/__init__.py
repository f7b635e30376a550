"""The store's migrations, in order, one numbering for every engine (migration ``n`` is item
``n - 1`` of ``MIGRATIONS``), kept by era so no module grows without end:

- ``pipeline``: 1-7, the pipeline's records, the store as its queue, cards, proactive tasks;
- ``acts``: 8-15, budgets by time, model usage, approvals and read-backs, an answer's pieces;
- ``standing``: 16-19, recurring jobs, feedback on answers, ask-user forms, knowledge
  snapshots from DingTalk.

Never edit a released migration: append a new one to the last era's list (``standing.STANDING``), or
start a new era module and add it at the end here. ``storage/schema.py`` renders them.
"""

from __future__ import annotations

from storage.migrations.acts import ACTS
from storage.migrations.pipeline import PIPELINE
from storage.migrations.standing import STANDING
from storage.migrations.step import Migration

MIGRATIONS: list[Migration] = [*PIPELINE, *ACTS, *STANDING]

__all__ = ["MIGRATIONS", "Migration"]
