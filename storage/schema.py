"""The store's schema: one ordered list of migrations for every engine, one numbering.

A migration is written once, in the SQL the engines share, with a few words left for the
engine to fill in (``{real}``, ``{integer}``, ``{serial}``, ``{rowid}``: see ``Dialect``);
where an engine needs a statement of its own (a trigger, a JSON function) the migration
carries it beside the shared part. Each backend records how far a database has come and
applies the rest in order (``storage/backends/``). The migrations themselves are kept by era
in ``storage/migrations/``; never edit a released one: append a new one.

    for number, script in enumerate(scripts(SQLITE), start=1):
        ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

# MIGRATIONS is read here, at call time, so a test may shorten it on this module.
from storage.migrations import MIGRATIONS, Migration


@dataclass(frozen=True)
class Dialect:
    """How one engine spells what the store's SQL leaves open."""

    name: str
    real: str
    integer: str
    serial: str  # an integer primary key the database numbers itself
    # The column "oldest first" orders by: SQLite has one built in; elsewhere it is declared
    # on every table read in order, so the same ``ORDER BY rowid`` means the same thing.
    rowid: str
    # Appended to a SELECT whose rows the transaction holds until it commits (fencing).
    lock_rows: str
    lock_rows_of: str  # the same, for the rows of one table of a join (``{table}``)
    # The day's write budget: SQLite keeps the ledger's rows per hour (migration 8) so the
    # count before every write reads little; PostgreSQL counts its index.
    hourly_budget: bool
    words: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        words = {"real": self.real, "integer": self.integer, "serial": self.serial}
        object.__setattr__(self, "words", {**words, "rowid": self.rowid})

    def render(self, sql: str) -> str:
        return sql.format_map(self.words)


SQLITE = Dialect(
    name="sqlite",
    real="REAL",
    integer="INTEGER",
    serial="INTEGER PRIMARY KEY",
    rowid="",
    lock_rows="",  # one writer at a time holds the whole file (BEGIN IMMEDIATE)
    lock_rows_of="",
    hourly_budget=True,
)
POSTGRESQL = Dialect(
    name="postgresql",
    real="DOUBLE PRECISION",
    integer="BIGINT",
    serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    rowid="rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,",
    lock_rows=" FOR UPDATE",
    lock_rows_of=" FOR UPDATE OF {table}",
    hourly_budget=False,
)


def scripts(dialect: Dialect) -> list[str]:
    """Every migration's SQL for ``dialect``, in order (migration ``n`` is item ``n - 1``)."""
    return [migration.script(dialect) for migration in MIGRATIONS]


def newer_than_this_dta(version: int) -> str:
    return (
        f"store schema version {version} is newer than this dta ({len(MIGRATIONS)}); "
        "upgrade dta or use another store"
    )


__all__ = [
    "MIGRATIONS",
    "POSTGRESQL",
    "SQLITE",
    "Dialect",
    "Migration",
    "newer_than_this_dta",
    "scripts",
]
