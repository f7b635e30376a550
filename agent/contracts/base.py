"""The shared base of every contract and the small helpers the contracts lean on.

``Contract`` is the pydantic base all boundary models inherit: unknown fields are an error,
and ``to_json``/``to_dict`` give the one JSON form (by alias, ``None`` left out). ``new_id``,
``sha256_text`` and ``canonical_json`` live here because models (``SkillSnapshot.digest``,
``MemoryCandidate.id_for``) and the rest of the project both need them, and this module sits
at the bottom of the package: it imports nothing from the project, not even its siblings.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict


class Contract(BaseModel):
    """Base of every boundary model: unknown fields are an error, not a surprise."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=False)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# Ids need to be unique, not secret: a generator seeded once from the OS per process costs
# a fraction of reading the OS's random source for every id.
_ids = random.Random()


_SCHEMA_NAME = re.compile(r"[^a-z0-9_]+")


def schema_for(robot_code: str | None) -> str:
    """The PostgreSQL schema a robot's records live in unless configured otherwise:
    ``dta_<robot code>`` in lowercase letters, digits and ``_`` (so ``HR`` and ``hr`` are
    one schema: the configuration refuses two robots on it)."""
    name = _SCHEMA_NAME.sub("_", (robot_code or "default").lower()).strip("_") or "default"
    return f"dta_{name}"[:63]


def new_id(prefix: str) -> str:
    """A unique id that sorts by creation time (microseconds, then 24 random bits).

    Time-ordered keys append at the end of the store's indexes instead of scattering
    writes across them, which keeps each commit small.
    """
    return f"{prefix}_{time.time_ns() // 1000:013x}{_ids.getrandbits(24):06x}"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Stable JSON for hashing: sorted keys, no whitespace, UTF-8 kept readable."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
