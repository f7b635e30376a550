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
from typing import Any

from pydantic import ValidationError

from agent.contracts import ActionKind, SkillRef, SkillSnapshot
from skills.conditions import HAS_TOOLS, UnknownCondition, holds, parse_condition
from skills.frontmatter import (
    Frontmatter,
    SkillError,
    describe_error,
    metadata_version,
    split_frontmatter,
)

# The four ways of talking; a skill that says nothing allows them and acts (which only
# enabled tools make possible).
TALKING = (ActionKind.ACK, ActionKind.REPLY, ActionKind.ASK, ActionKind.SILENCE)
UNNARROWED = (*TALKING, ActionKind.ACT)  # a skill that does not say narrows nothing

CORE_SKILLS_DIR = Path(__file__).parent / "core"
SKILL_FILE = "SKILL.md"
REFERENCES_DIR = "references"
_REFERENCE_LINK = re.compile(r"(?<![\w/])(?:\./)?references/([\w.-]+\.md)\b")


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
    notes: tuple[str, ...] = ()  # what was loaded leniently (no version): it applies
    # ``allowed_actions`` was given (it narrows, acts included); unset, it narrows nothing
    narrows_actions: bool = False
    # the tools a run it applies to may call (None: it does not narrow them)
    tools: tuple[str, ...] | None = None

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
        held = (holds(condition, facts, tools) for condition in self.conditions)
        return any(held) if self.match == "any" else all(held)


def load_skill(folder: Path) -> Skill:
    """Load and validate one skill folder; every problem becomes a SkillError."""
    skill_file = folder / SKILL_FILE
    raw, meta, body = _read_skill_file(skill_file)
    notes: list[str] = []  # loaded as written, but worth saying (never stops it applying)
    version = meta.version or metadata_version(meta.metadata)
    if version is None:
        # the seeds' published files have none: the content hash in the snapshot still
        # says exactly what was loaded
        version = UNVERSIONED
        notes.append("no version (or metadata.version): listed as unversioned")
    notes.extend(_check_name(folder, skill_file, meta.name))
    warnings = _condition_warnings(skill_file, meta.conditions)
    files = {SKILL_FILE: hashlib.sha256(raw).hexdigest()}
    references = _read_references(folder, skill_file, body, files)
    actions = meta.allowed_actions if meta.allowed_actions is not None else UNNARROWED
    return Skill(
        name=meta.name,
        description=meta.description,
        version=version,
        priority=meta.priority,
        conditions=tuple(c.strip() for c in meta.conditions),
        allowed_actions=tuple(k for k in ActionKind if k in actions),
        body=body,
        path=folder,
        files=files,
        references=references,
        tags=tuple(str(tag) for tag in meta.tags),
        compatibility=meta.compatibility,
        metadata=dict(meta.metadata),
        match=meta.match,
        warnings=tuple(warnings),
        notes=tuple(notes),
        narrows_actions=meta.allowed_actions is not None,
        tools=tuple(meta.tools) if meta.tools is not None else None,
    )


def _read_skill_file(skill_file: Path) -> tuple[bytes, Frontmatter, str]:
    """``SKILL.md``'s bytes (hashed for the snapshot), its checked frontmatter and its body."""
    try:
        raw = skill_file.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{skill_file}: cannot be read as UTF-8: {exc}") from exc
    data, body = split_frontmatter(skill_file, text)
    try:
        meta = Frontmatter.model_validate(data)
    except ValidationError as exc:
        raise SkillError(describe_error(skill_file, exc)) from None
    return raw, meta, body


def _check_name(folder: Path, skill_file: Path, name: str) -> list[str]:
    """The skill's name must be its folder's, or the folder's past an order number (a
    numbered folder holding another name is loaded, with a note)."""
    if name == folder.name:
        return []
    if not _ORDER_PREFIX.match(folder.name):
        raise SkillError(
            f"{skill_file}: field 'name': {name!r} must equal the folder name"
            f" {folder.name!r} (or the folder is numbered, such as '80-{name}')"
        )
    if _ORDER_PREFIX.sub("", folder.name, count=1) != name:
        return [f"folder {folder.name!r} holds the skill {name!r}"]
    return []


def _condition_warnings(skill_file: Path, conditions: list[str]) -> list[str]:
    """A malformed condition refuses the skill; an unknown one is a warning (it never
    applies)."""
    warnings: list[str] = []
    for index, condition in enumerate(conditions):
        if condition.strip().lower() == HAS_TOOLS:
            continue
        try:
            parse_condition(condition)
        except UnknownCondition as exc:
            warnings.append(f"conditions.{index}: {exc}; the skill never applies")
        except ValueError as exc:
            raise SkillError(f"{skill_file}: field 'conditions.{index}': {exc}") from None
    return warnings


def _read_references(
    folder: Path, skill_file: Path, body: str, files: dict[str, str]
) -> dict[str, str]:
    """The references the body links, as text; each file's hash is added to ``files``.
    A reference is loaded when the skill says so: its body links the file. Files nobody
    links are drafts or leftovers, and stay out of prompts and snapshots."""
    references: dict[str, str] = {}
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
    return references


UNVERSIONED = "unversioned"
# A numbered folder, as the seeds publish theirs (``80-tool-usage`` holds ``tool-usage``,
# ``81-anti-deferred`` holds ``anti-deferred-execution``): the number orders folders on
# disk; the skill is known by its ``name`` (two folders with one name are still refused).
_ORDER_PREFIX = re.compile(r"^\d+[-_]")


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


def select(
    skills: Iterable[Skill],
    *,
    msgtype: str,
    scene: str,
    provider: str,
    tools: frozenset[str] = frozenset(),
) -> list[Skill]:
    """The skills whose conditions hold for this event (``tools``: the enabled ones, for
    ``has-tools`` and ``tool:<name>``), in (-priority, name) order."""
    chosen = [
        s
        for s in skills
        if s.applies_to(msgtype=msgtype, scene=scene, provider=provider, tools=tools)
    ]
    return sorted(chosen, key=_sort_key)


def snapshot(skills: Sequence[Skill]) -> SkillSnapshot:
    """Freeze names, versions and load-time hashes into the contract stamped on receipts."""
    return SkillSnapshot(
        skills=[SkillRef(name=s.name, version=s.version, files=dict(s.files)) for s in skills]
    )


def allowed_actions(skills: Iterable[Skill]) -> list[ActionKind]:
    """Actions every selected skill allows, in enum order.

    Skills can only narrow what a run may do: the actions are the intersection of those
    the skills that say (``allowed_actions``) allow; a skill that does not say narrows
    nothing, and with no skills all remain. A skill that lists no ``act`` stops acts while
    it applies (refused ``action_not_allowed``); the enabled ``tools`` still decide which
    acts are possible at all. (``confirm`` is the host's own.)
    """
    allowed = {*TALKING, ActionKind.ACT}
    for skill in skills:
        if skill.narrows_actions:
            allowed &= set(skill.allowed_actions)
    return [kind for kind in ActionKind if kind in allowed]


def allowed_tools(skills: Iterable[Skill]) -> frozenset[str] | None:
    """The tools every selected skill that names tools allows (None: none narrows them);
    the robot's enabled ``tools`` are intersected with this."""
    allowed: frozenset[str] | None = None
    for skill in skills:
        if skill.tools is not None:
            named = frozenset(skill.tools)
            allowed = named if allowed is None else allowed & named
    return allowed


_Selection = tuple[SkillSnapshot, tuple[ActionKind, ...]]


class SkillLibrary:
    """All skills loaded once, with per-event selection cached.

    ``for_event`` runs for every message, so it reuses the snapshot built for an identical
    selection instead of rebuilding it; the returned snapshot is shared and must be treated
    as read-only.
    """

    def __init__(self, paths: Sequence[Path] = (), tools: Iterable[str] = ()) -> None:
        self.skills: tuple[Skill, ...] = tuple(discover(paths))
        self.tools = frozenset(tools)  # enabled here: what has-tools and tool:<name> see
        self._by_selection: dict[tuple[str, ...], _Selection] = {}
        self._by_event: dict[tuple[str, str, str], tuple[Skill, ...]] = {}

    def for_event(
        self, msgtype: str, scene: str, provider: str
    ) -> tuple[list[Skill], SkillSnapshot, list[ActionKind]]:
        """Selected skills, their snapshot and the actions they jointly allow."""
        event_key = (msgtype, str(scene), provider)
        chosen = self._by_event.get(event_key)
        if chosen is None:
            chosen = tuple(
                select(
                    self.skills, msgtype=msgtype, scene=scene, provider=provider, tools=self.tools
                )
            )
            self._by_event[event_key] = chosen
        names = tuple(s.name for s in chosen)
        cached = self._by_selection.get(names)
        if cached is None:
            cached = (snapshot(chosen), tuple(allowed_actions(chosen)))
            self._by_selection[names] = cached
        snap, actions = cached
        return list(chosen), snap, list(actions)
