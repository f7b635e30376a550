"""Loading behavior skills from folders into immutable, hashed values.

A skill is a folder holding ``SKILL.md`` (YAML frontmatter + Markdown body) and optional
``references/*.md``. Everything is read and hashed exactly once, at load time: a run stamps
the hashes of the skills it used on every receipt, so the snapshot must describe what was
actually loaded, and the per-message path must not touch the disk again.

Mistakes in a skill are configuration errors, so they fail loudly at start-up with the
file, the field and the reason, instead of silently changing the robot's behaviour.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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

from agent.contracts import ActionKind, SkillRef, SkillSnapshot

# What a skill allows when it does not say: the four ways of talking (acts are granted by
# basic-behavior and made possible only by enabled tools).
TALKING = (ActionKind.ACK, ActionKind.REPLY, ActionKind.ASK, ActionKind.SILENCE)

CORE_SKILLS_DIR = Path(__file__).parent / "core"
SKILL_FILE = "SKILL.md"
REFERENCES_DIR = "references"
_REFERENCE_LINK = re.compile(r"(?<![\w/])(?:\./)?references/([\w.-]+\.md)\b")

#: Condition keys a skill may use, and (where the set is closed) the values they accept.
#: ``tool:<name>`` applies when that tool is enabled; the bare ``has-tools`` when any is.
CONDITION_KEYS: dict[str, frozenset[str] | None] = {
    "msgtype": None,
    "scene": frozenset({"dm", "group"}),
    "provider": None,
    "tool": None,
}
HAS_TOOLS = "has-tools"


class UnknownCondition(ValueError):
    """A condition this dta does not know (a newer or another host's): the skill is loaded
    and listed with a warning, and never applies."""


class SkillError(Exception):
    """A skill folder that cannot be loaded; the message names the file and the reason."""


@dataclass(frozen=True)
class Skill:
    """One loaded skill. Hashes are computed at load so snapshots never re-read files."""

    name: str
    description: str
    version: str
    priority: int
    conditions: tuple[str, ...]
    allowed_actions: tuple[ActionKind, ...]
    body: str
    path: Path
    files: dict[str, str] = field(hash=False)  # rel path -> sha256 hex of the bytes
    references: dict[str, str] = field(hash=False, repr=False)  # rel path -> text
    # The seeds' header fields, recorded as given (``metadata.version`` is the version).
    tags: tuple[str, ...] = ()
    compatibility: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    match: str = "all"  # "all" conditions must hold, or "any" of them
    warnings: tuple[str, ...] = ()  # why it never applies (an unknown condition)

    def applies_to(
        self, *, msgtype: str, scene: str, provider: str, tools: frozenset[str] = frozenset()
    ) -> bool:
        """Its conditions, all or any of them (``match``); a skill without conditions always
        applies, one with a condition this dta does not know never does."""
        if self.warnings:
            return False
        if not self.conditions:
            return True
        facts = {"msgtype": msgtype, "scene": str(scene), "provider": provider}
        held = (_holds(condition, facts, tools) for condition in self.conditions)
        return any(held) if self.match == "any" else all(held)


def _holds(condition: str, facts: dict[str, str], tools: frozenset[str]) -> bool:
    if condition.strip().lower() == HAS_TOOLS:
        return bool(tools)
    key, values = parse_condition(condition)
    if key == "tool":
        return bool(values & tools)
    return facts[key] in values


class _Frontmatter(BaseModel):
    """The frontmatter schema. Unknown keys are refused so typos do not go unnoticed."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    version: str | None = Field(default=None, min_length=1)  # or metadata.version
    priority: StrictInt = 0
    conditions: list[str] = Field(default_factory=list)
    # Unset: the four talking kinds. Acts are granted by basic-behavior alone, and only
    # enabled tools make one possible.
    allowed_actions: list[ActionKind] | None = None
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


def _metadata_version(metadata: dict[str, Any]) -> str | None:
    """The seeds' ``metadata: {version: "0.11.0"}``, as text."""
    given = metadata.get("version")
    if given is None or isinstance(given, bool | dict | list) or not str(given).strip():
        return None
    return str(given)


def parse_condition(condition: str) -> tuple[str, frozenset[str]]:
    """Split ``key:v1|v2`` into its key and accepted values; raise ValueError if malformed."""
    key, sep, raw_values = condition.partition(":")
    key = key.strip().lower()
    values = frozenset(v.strip() for v in raw_values.split("|") if v.strip())
    if not sep or not key or not values:
        raise ValueError(f"condition {condition!r} is not of the form key:value or key:v1|v2")
    if key not in CONDITION_KEYS:
        known = ", ".join([*sorted(CONDITION_KEYS), HAS_TOOLS])
        raise UnknownCondition(f"condition {condition!r} has unknown key {key!r} (known: {known})")
    closed = CONDITION_KEYS[key]
    if closed is not None and not values <= closed:
        bad = ", ".join(sorted(values - closed))
        raise ValueError(f"condition {condition!r}: {key} must be one of {sorted(closed)}: {bad}")
    return key, values


def _split_frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str]:
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


def _describe(path: Path, error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "frontmatter"
        if item["type"] == "missing":
            reason = "is required"
        elif item["type"] == "extra_forbidden":
            reason = f"unknown field (allowed: {', '.join(_Frontmatter.model_fields)})"
        else:
            reason = f"{item['msg']} (got {item['input']!r})"
        parts.append(f"field '{where}': {reason}")
    return f"{path}: " + "; ".join(parts)


def load_skill(folder: Path) -> Skill:
    """Load and validate one skill folder; every problem becomes a SkillError."""
    skill_file = folder / SKILL_FILE
    try:
        raw = skill_file.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{skill_file}: cannot be read as UTF-8: {exc}") from exc
    data, body = _split_frontmatter(skill_file, text)
    try:
        meta = _Frontmatter.model_validate(data)
    except ValidationError as exc:
        raise SkillError(_describe(skill_file, exc)) from None
    version = meta.version or _metadata_version(meta.metadata)
    if version is None:
        raise SkillError(f"{skill_file}: field 'version': is required (or metadata.version)")
    if meta.name != folder.name:
        raise SkillError(
            f"{skill_file}: field 'name': {meta.name!r} must equal the folder name {folder.name!r}"
        )
    warnings: list[str] = []
    for index, condition in enumerate(meta.conditions):
        if condition.strip().lower() == HAS_TOOLS:
            continue
        try:
            parse_condition(condition)
        except UnknownCondition as exc:
            warnings.append(f"conditions.{index}: {exc}; the skill never applies")
        except ValueError as exc:
            raise SkillError(f"{skill_file}: field 'conditions.{index}': {exc}") from None

    files = {SKILL_FILE: hashlib.sha256(raw).hexdigest()}
    references: dict[str, str] = {}
    # A reference is loaded when the skill says so: its body links the file. Files nobody
    # links are drafts or leftovers, and stay out of prompts and snapshots.
    for name in sorted(set(_REFERENCE_LINK.findall(body))):
        rel = f"{REFERENCES_DIR}/{name}"
        ref = folder / rel
        try:
            ref_raw = ref.read_bytes()
            references[rel] = ref_raw.decode("utf-8")
        except FileNotFoundError:
            raise SkillError(f"{skill_file}: links {rel}, which does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillError(f"{ref}: cannot be read as UTF-8: {exc}") from exc
        files[rel] = hashlib.sha256(ref_raw).hexdigest()

    return Skill(
        name=meta.name,
        description=meta.description,
        version=version,
        priority=meta.priority,
        conditions=tuple(c.strip() for c in meta.conditions),
        allowed_actions=tuple(k for k in ActionKind if k in (meta.allowed_actions or TALKING)),
        body=body,
        path=folder,
        files=files,
        references=references,
        tags=tuple(str(tag) for tag in meta.tags),
        compatibility=meta.compatibility,
        metadata=dict(meta.metadata),
        match=meta.match,
        warnings=tuple(warnings),
    )


def _skill_folders(root: Path) -> list[Path]:
    """A root is either a skill folder itself or a folder whose subfolders are skills."""
    if not root.is_dir():
        raise SkillError(f"{root}: skill path does not exist or is not a folder")
    if (root / SKILL_FILE).is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file())


def _sort_key(skill: Skill) -> tuple[int, str]:
    return (-skill.priority, skill.name)


def discover(paths: Sequence[Path] = ()) -> list[Skill]:
    """Load the core skills plus those under ``paths``, sorted by (-priority, name).

    The same folder reached twice is loaded once; two different folders declaring the
    same name are an error, because which one wins would otherwise depend on path order.
    """
    seen_folders: set[Path] = set()
    by_name: dict[str, Skill] = {}
    for root in (CORE_SKILLS_DIR, *(Path(p) for p in paths)):
        for folder in _skill_folders(root):
            resolved = folder.resolve()
            if resolved in seen_folders:
                continue
            seen_folders.add(resolved)
            skill = load_skill(folder)
            other = by_name.get(skill.name)
            if other is not None:
                raise SkillError(
                    f"duplicate skill name {skill.name!r}: {other.path / SKILL_FILE} "
                    f"and {folder / SKILL_FILE}"
                )
            by_name[skill.name] = skill
    return sorted(by_name.values(), key=_sort_key)


def select(skills: Iterable[Skill], *, msgtype: str, scene: str, provider: str) -> list[Skill]:
    """The skills whose conditions all hold for this event, in (-priority, name) order."""
    chosen = [s for s in skills if s.applies_to(msgtype=msgtype, scene=scene, provider=provider)]
    return sorted(chosen, key=_sort_key)


def snapshot(skills: Sequence[Skill]) -> SkillSnapshot:
    """Freeze names, versions and load-time hashes into the contract stamped on receipts."""
    return SkillSnapshot(
        skills=[SkillRef(name=s.name, version=s.version, files=dict(s.files)) for s in skills]
    )


def allowed_actions(skills: Iterable[Skill]) -> list[ActionKind]:
    """Actions every selected skill allows, in enum order.

    Skills can only narrow what a run may do, so the talking kinds are an intersection;
    with no skills there is nothing to narrow and all remain. ``act`` is granted by
    basic-behavior and is not the operator skills' to narrow: the enabled ``tools`` (and the
    action gate's act checks) decide what a run may do to the workspace. (``confirm`` is
    the host's own.)
    """
    chosen = list(skills)
    allowed = set(TALKING)
    for skill in chosen:
        allowed &= set(skill.allowed_actions)
    if not chosen or any(ActionKind.ACT in skill.allowed_actions for skill in chosen):
        allowed.add(ActionKind.ACT)
    return [kind for kind in ActionKind if kind in allowed]


_Selection = tuple[SkillSnapshot, tuple[ActionKind, ...]]


class SkillLibrary:
    """All skills loaded once, with per-event selection cached.

    ``for_event`` runs for every message, so it reuses the snapshot built for an identical
    selection instead of rebuilding it; the returned snapshot is shared and must be treated
    as read-only.
    """

    def __init__(self, paths: Sequence[Path] = ()) -> None:
        self.skills: tuple[Skill, ...] = tuple(discover(paths))
        self._by_selection: dict[tuple[str, ...], _Selection] = {}
        self._by_event: dict[tuple[str, str, str], tuple[Skill, ...]] = {}

    def for_event(
        self, msgtype: str, scene: str, provider: str
    ) -> tuple[list[Skill], SkillSnapshot, list[ActionKind]]:
        """Selected skills, their snapshot and the actions they jointly allow."""
        event_key = (msgtype, str(scene), provider)
        chosen = self._by_event.get(event_key)
        if chosen is None:
            chosen = tuple(select(self.skills, msgtype=msgtype, scene=scene, provider=provider))
            self._by_event[event_key] = chosen
        names = tuple(s.name for s in chosen)
        cached = self._by_selection.get(names)
        if cached is None:
            cached = (snapshot(chosen), tuple(allowed_actions(chosen)))
            self._by_selection[names] = cached
        snap, actions = cached
        return list(chosen), snap, list(actions)
