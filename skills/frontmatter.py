"""Reading one ``SKILL.md``: its YAML frontmatter split from the Markdown body and checked
against the schema, every mistake a ``SkillError`` naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
)

from agent.contracts import ActionKind


class SkillError(Exception):
    """A skill folder that cannot be loaded; the message names the file and the reason."""


class Frontmatter(BaseModel):
    """The frontmatter schema. Unknown keys are refused so typos do not go unnoticed."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    # or metadata.version; neither: loaded as unversioned, with a note (the seeds' files)
    version: str | None = Field(default=None, min_length=1)
    priority: StrictInt = 0
    conditions: list[str] = Field(default_factory=list)
    # Unset: nothing narrowed. Given, only these (without ``act`` no write runs while the
    # skill applies); only enabled tools make an act possible at all.
    allowed_actions: list[ActionKind] | None = None
    # The tools a run this skill applies to may call, among those enabled for the robot.
    tools: list[str] | None = None
    # The seeds' own header format (../shared/seeds/): kept on the skill, shown in listings.
    tags: list[str] = Field(default_factory=list)
    compatibility: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    match: Literal["any", "all"] = "all"

    @field_validator("description", mode="before")
    @classmethod
    def _strip_description(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # YAML reads `version: 1.0` as a float; a version is a label, so keep it as text.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value


def metadata_version(metadata: dict[str, Any]) -> str | None:
    """The seeds' ``metadata: {version: "0.11.0"}``, as text."""
    given = metadata.get("version")
    if given is None or isinstance(given, bool | dict | list) or not str(given).strip():
        return None
    return str(given)


def split_frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str]:
    """Return (frontmatter mapping, body). The frontmatter sits between two ``---`` lines."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{path}: missing YAML frontmatter (the file must start with '---')")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            header = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            break
    else:
        raise SkillError(f"{path}: frontmatter is not closed by a '---' line")
    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError as exc:
        raise SkillError(f"{path}: frontmatter is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SkillError(f"{path}: frontmatter must be a YAML mapping of fields")
    return data, body.strip("\n")


def describe_error(path: Path, error: ValidationError) -> str:
    """A validation error as one line: the file, then each field and what is wrong."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "frontmatter"
        if item["type"] == "missing":
            reason = "is required"
        elif item["type"] == "extra_forbidden":
            reason = f"unknown field (allowed: {', '.join(Frontmatter.model_fields)})"
        else:
            reason = f"{item['msg']} (got {item['input']!r})"
        parts.append(f"field '{where}': {reason}")
    return f"{path}: " + "; ".join(parts)
