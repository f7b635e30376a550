"""One step of the store's schema: SQL shared by every engine, then each engine's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the dialect renders a step; the schema imports the steps
    from storage.schema import Dialect


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``shared`` SQL for every engine, then each engine's own."""

    title: str
    shared: str = ""
    only: dict[str, str] = field(default_factory=dict)  # engine name -> its own SQL

    def script(self, dialect: Dialect) -> str:
        return dialect.render(self.shared) + "\n" + self.only.get(dialect.name, "")
