"""Skill loading: validation errors name file and field, hashes are taken once, selection."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.contracts import ActionKind, SkillSnapshot
from skills import loader
from skills.loader import (
    CORE_SKILLS_DIR,
    Skill,
    SkillError,
    SkillLibrary,
    allowed_actions,
    allowed_tools,
    discover,
    load_skill,
    select,
    snapshot,
)

ALL_ACTIONS = [ActionKind.ACK, ActionKind.REPLY, ActionKind.ASK, ActionKind.SILENCE]
# basic-behavior grants acts too; enabled tools are what make one possible
CORE_ACTIONS = [*ALL_ACTIONS, ActionKind.ACT]


def write_skill(
    root: Path,
    name: str,
    front: dict[str, Any] | None = None,
    *,
    body: str = "Do the careful thing.\n",
    refs: dict[str, str] | None = None,
    raw: str | None = None,
) -> Path:
    """Create root/name/SKILL.md (from ``front`` or verbatim ``raw``) and references."""
    folder = root / name
    folder.mkdir(parents=True)
    if refs and body == "Do the careful thing.\n":
        body += "".join(f"See references/{rel}.\n" for rel in refs)  # a skill links its refs
    if raw is None:
        meta = {"name": name, "description": f"{name} skill", "version": "1.0"}
        meta.update(front or {})
        raw = "---\n" + yaml.safe_dump(meta, allow_unicode=True) + "---\n" + body
    (folder / "SKILL.md").write_text(raw, encoding="utf-8")
    for rel, text in (refs or {}).items():
        (folder / "references").mkdir(exist_ok=True)
        (folder / "references" / rel).write_text(text, encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- core skill


def test_core_basic_behavior_is_always_loaded() -> None:
    skills = discover()
    core = next(s for s in skills if s.name == "basic-behavior")
    assert core.version == "1.0.0"
    assert core.priority == 100
    assert core.conditions == ()
    assert list(core.allowed_actions) == CORE_ACTIONS
    assert core.path == CORE_SKILLS_DIR / "basic-behavior"
    for word in ("silence", "ack", "reply", "ask", "ActionRequest", "statement", "forget"):
        assert word in core.body
    assert "---" not in core.body.splitlines()[0]


def test_core_hashes_cover_skill_file_and_references() -> None:
    core = next(s for s in discover() if s.name == "basic-behavior")
    folder = CORE_SKILLS_DIR / "basic-behavior"
    expected = {"SKILL.md": hashlib.sha256((folder / "SKILL.md").read_bytes()).hexdigest()}
    for ref in (folder / "references").glob("*.md"):
        expected[f"references/{ref.name}"] = hashlib.sha256(ref.read_bytes()).hexdigest()
    assert core.files == expected
    assert set(core.references) == set(expected) - {"SKILL.md"}


# --------------------------------------------------------------------------- parsing


def test_fields_defaults_and_numeric_version(tmp_path: Path) -> None:
    write_skill(tmp_path, "plain", {"version": 2}, refs={"notes.md": "# Notes\n"})
    skill = load_skill(tmp_path / "plain")
    assert skill.version == "2"
    assert skill.priority == 0
    assert skill.conditions == ()
    assert list(skill.allowed_actions) == CORE_ACTIONS and not skill.narrows_actions
    assert skill.body == "Do the careful thing.\nSee references/notes.md."
    assert skill.references == {"references/notes.md": "# Notes\n"}
    assert set(skill.files) == {"SKILL.md", "references/notes.md"}


def test_float_version_kept_as_text(tmp_path: Path) -> None:
    write_skill(tmp_path, "v", raw="---\nname: v\ndescription: d\nversion: 1.5\n---\nbody\n")
    assert load_skill(tmp_path / "v").version == "1.5"


def test_allowed_actions_are_kept_in_enum_order(tmp_path: Path) -> None:
    write_skill(tmp_path, "quiet", {"allowed_actions": ["silence", "reply"]})
    assert load_skill(tmp_path / "quiet").allowed_actions == (
        ActionKind.REPLY,
        ActionKind.SILENCE,
    )


@pytest.mark.parametrize(
    ("front", "field", "why"),
    [
        ({"description": None}, "description", "string"),
        ({"description": "   "}, "description", "at least 1"),
        ({"priority": "high"}, "priority", "valid integer"),
        ({"priority": 1.5}, "priority", "valid integer"),
        ({"colour": "blue"}, "colour", "unknown field"),
        ({"allowed_actions": ["reply", "shout"]}, "allowed_actions.1", "'shout'"),
        ({"conditions": "msgtype:text"}, "conditions", "valid list"),
        ({"conditions": ["scene:channel"]}, "conditions.0", "channel"),
        ({"conditions": ["msgtype"]}, "conditions.0", "key:value"),
    ],
)
def test_bad_fields_name_file_and_field(
    tmp_path: Path, front: dict[str, Any], field: str, why: str
) -> None:
    write_skill(tmp_path, "broken", front)
    with pytest.raises(SkillError) as info:
        load_skill(tmp_path / "broken")
    message = str(info.value)
    assert str(tmp_path / "broken" / "SKILL.md") in message
    assert f"field '{field}'" in message
    assert why in message


@pytest.mark.parametrize("missing", ["name", "description"])
def test_missing_required_field(tmp_path: Path, missing: str) -> None:
    lines = {"name": "name: gap", "description": "description: d", "version": "version: '1'"}
    del lines[missing]
    write_skill(tmp_path, "gap", raw="---\n" + "\n".join(lines.values()) + "\n---\nbody\n")
    with pytest.raises(SkillError, match=rf"SKILL\.md: field '{missing}': is required"):
        load_skill(tmp_path / "gap")


def test_priority_example_message(tmp_path: Path) -> None:
    write_skill(tmp_path, "x", {"priority": "soon"})
    with pytest.raises(SkillError) as info:
        load_skill(tmp_path / "x")
    assert str(info.value) == (
        f"{tmp_path / 'x' / 'SKILL.md'}: field 'priority': Input should be a valid integer "
        "(got 'soon')"
    )


def test_name_must_match_folder(tmp_path: Path) -> None:
    write_skill(tmp_path, "folder-name", {"name": "other-name"})
    with pytest.raises(SkillError, match=r"field 'name': 'other-name' must equal.*'folder-name'"):
        load_skill(tmp_path / "folder-name")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("# no frontmatter\n", "missing YAML frontmatter"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a\n- b\n---\n", "must be a YAML mapping"),
        ("---\n---\nbody\n", "must be a YAML mapping"),
    ],
)
def test_malformed_frontmatter(tmp_path: Path, raw: str, why: str) -> None:
    write_skill(tmp_path, "x", raw=raw)
    with pytest.raises(SkillError, match=why) as info:
        load_skill(tmp_path / "x")
    assert str(tmp_path / "x" / "SKILL.md") in str(info.value)


# --------------------------------------------------------------------------- discovery


def test_discover_sorts_by_priority_then_name(tmp_path: Path) -> None:
    write_skill(tmp_path, "b-skill", {"priority": 5})
    write_skill(tmp_path, "a-skill", {"priority": 5})
    write_skill(tmp_path, "low", {"priority": -1})
    write_skill(tmp_path, "top", {"priority": 500})
    (tmp_path / "not-a-skill").mkdir()
    names = [s.name for s in discover([tmp_path])]
    assert names == ["top", "basic-behavior", "a-skill", "b-skill", "low"]


def test_discover_accepts_a_single_skill_folder(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "solo")
    assert [s.name for s in discover([folder])] == ["basic-behavior", "solo"]


def test_same_folder_twice_is_not_a_duplicate(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "solo")
    assert [s.name for s in discover([tmp_path, folder])] == ["basic-behavior", "solo"]


def test_duplicate_names_name_both_paths(tmp_path: Path) -> None:
    write_skill(tmp_path / "one", "twin")
    write_skill(tmp_path / "two", "twin")
    with pytest.raises(SkillError) as info:
        discover([tmp_path / "one", tmp_path / "two"])
    message = str(info.value)
    assert "'twin'" in message
    assert str(tmp_path / "one" / "twin" / "SKILL.md") in message
    assert str(tmp_path / "two" / "twin" / "SKILL.md") in message


def test_duplicate_of_a_core_skill_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "basic-behavior")
    with pytest.raises(SkillError, match="duplicate skill name 'basic-behavior'"):
        discover([tmp_path])


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="does not exist"):
        discover([tmp_path / "nowhere"])


def test_a_broken_skill_stops_discovery(tmp_path: Path) -> None:
    write_skill(tmp_path, "fine")
    write_skill(tmp_path, "typo", {"prority": 3})
    with pytest.raises(SkillError, match="field 'prority': unknown field"):
        discover([tmp_path])


# --------------------------------------------------------------------------- selection


@pytest.fixture
def conditional(tmp_path: Path) -> list[Skill]:
    write_skill(tmp_path, "text-only", {"conditions": ["msgtype:text"]})
    write_skill(tmp_path, "group-only", {"conditions": ["scene:group"]})
    write_skill(tmp_path, "model", {"conditions": ["provider:openai|command"]})
    write_skill(
        tmp_path, "group-text-rules", {"conditions": ["scene: group", "msgtype:text|markdown"]}
    )
    return discover([tmp_path])


def names(skills: list[Skill]) -> list[str]:
    return [s.name for s in skills]


def test_select_requires_every_condition(conditional: list[Skill]) -> None:
    chosen = select(conditional, msgtype="text", scene="group", provider="rules")
    assert names(chosen) == ["basic-behavior", "group-only", "group-text-rules", "text-only"]
    chosen = select(conditional, msgtype="text", scene="dm", provider="rules")
    assert names(chosen) == ["basic-behavior", "text-only"]
    chosen = select(conditional, msgtype="picture", scene="group", provider="command")
    assert names(chosen) == ["basic-behavior", "group-only", "model"]
    chosen = select(conditional, msgtype="markdown", scene="group", provider="openai")
    assert names(chosen) == ["basic-behavior", "group-only", "group-text-rules", "model"]


def test_allowed_actions_is_an_intersection(tmp_path: Path) -> None:
    write_skill(tmp_path, "a", {"allowed_actions": ["silence", "reply", "ask"]})
    write_skill(tmp_path, "b", {"allowed_actions": ["reply", "silence", "ack"]})
    skills = discover([tmp_path])
    # both skills say what they allow, and neither allows act: no write runs
    assert allowed_actions(skills) == [ActionKind.REPLY, ActionKind.SILENCE]
    assert allowed_actions([]) == CORE_ACTIONS


def test_a_skill_that_lists_no_act_stops_acts_one_that_says_nothing_narrows_nothing(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "talks-only", {"allowed_actions": ["reply", "silence"]})
    write_skill(tmp_path, "says-nothing", {})
    core = next(s for s in discover() if s.name == "basic-behavior")
    found = {s.name: s for s in discover([tmp_path])}
    assert allowed_actions([core, found["talks-only"]]) == [ActionKind.REPLY, ActionKind.SILENCE]
    assert allowed_actions([core, found["says-nothing"]]) == CORE_ACTIONS
    assert found["says-nothing"].narrows_actions is False


def test_tools_per_skill_are_an_intersection(tmp_path: Path) -> None:
    write_skill(tmp_path, "todo-only", {"tools": ["dingtalk.todo.create", "dingtalk.todo.list"]})
    write_skill(tmp_path, "lists", {"tools": ["dingtalk.todo.list", "dingtalk.directory.search"]})
    write_skill(tmp_path, "any-tool", {})
    found = {s.name: s for s in discover([tmp_path])}
    assert allowed_tools([found["any-tool"]]) is None
    assert allowed_tools([found["todo-only"], found["lists"], found["any-tool"]]) == {
        "dingtalk.todo.list"
    }


# --------------------------------------------------------------------------- snapshots


def test_snapshot_lists_names_versions_hashes(tmp_path: Path) -> None:
    write_skill(tmp_path, "extra", {"version": "0.3"}, refs={"a.md": "A"})
    skills = discover([tmp_path])
    snap = snapshot(skills)
    assert isinstance(snap, SkillSnapshot)
    refs = {ref.name: ref for ref in snap.skills}
    assert refs["extra"].version == "0.3"
    assert refs["extra"].files["references/a.md"] == hashlib.sha256(b"A").hexdigest()
    assert snapshot(discover([tmp_path])).digest == snap.digest


@pytest.mark.parametrize("changed", ["SKILL.md", "references/a.md"])
def test_snapshot_changes_when_a_file_changes(tmp_path: Path, changed: str) -> None:
    folder = write_skill(tmp_path, "extra", refs={"a.md": "A"})
    before = snapshot(discover([tmp_path]))
    target = folder / changed
    target.write_text(target.read_text(encoding="utf-8") + "\nmore\n", encoding="utf-8")
    after = snapshot(discover([tmp_path]))
    assert after.digest != before.digest


def test_only_linked_references_are_loaded(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "extra", refs={"a.md": "A"})
    before = snapshot(discover([tmp_path])).digest
    (folder / "references" / "draft.md").write_text("not linked", encoding="utf-8")
    loaded = next(s for s in discover([tmp_path]) if s.name == "extra")
    assert list(loaded.references) == ["references/a.md"]
    assert snapshot(discover([tmp_path])).digest == before
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "Also references/draft.md.\n", encoding="utf-8")
    assert snapshot(discover([tmp_path])).digest != before


def test_a_link_to_a_missing_reference_is_an_error(tmp_path: Path) -> None:
    write_skill(tmp_path, "broken", body="Read references/missing.md first.\n")
    with pytest.raises(SkillError, match=r"references/missing\.md"):
        discover([tmp_path])


# --------------------------------------------------------------------------- library


def test_library_for_event(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "group-quiet",
        {"conditions": ["scene:group"], "allowed_actions": ["reply", "silence"]},
    )
    library = SkillLibrary([tmp_path])
    skills, snap, actions = library.for_event("text", "group", "rules")
    assert names(skills) == ["basic-behavior", "group-quiet"]
    assert [ref.name for ref in snap.skills] == ["basic-behavior", "group-quiet"]
    assert actions == [ActionKind.REPLY, ActionKind.SILENCE]  # lists no act: acts stop
    skills, snap, actions = library.for_event("text", "dm", "rules")
    assert names(skills) == ["basic-behavior"]
    assert actions == CORE_ACTIONS


def test_library_hashes_once_and_reuses_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_skill(tmp_path, "extra")
    library = SkillLibrary([tmp_path])
    first = library.for_event("text", "dm", "rules")[1]

    calls: list[int] = []
    real_snapshot = loader.snapshot
    monkeypatch.setattr(loader, "snapshot", lambda s: calls.append(1) or real_snapshot(s))
    (folder / "SKILL.md").write_text("---\nname: extra\n---\nchanged\n", encoding="utf-8")

    again = library.for_event("text", "dm", "rules")[1]
    other_event = library.for_event("markdown", "dm", "openai")[1]  # same selected set
    assert again is first and other_event is first
    assert calls == []
    assert again.digest == first.digest  # the edited file was not re-read


SEED_HEADER = """---
name: seed-style
description: a skill written in the seeds' own header format
priority: 880
tags: [tool, anti-hallucination]
compatibility: Requires dingtalk-agent on PATH
metadata:
  version: "0.11.0"
match: any
conditions: [tool:local_read_file, scene:dm]
---
Say only what is true.
"""


def test_a_skill_in_the_seeds_header_format_loads_with_what_it_says(tmp_path: Path) -> None:
    write_skill(tmp_path, "seed-style", raw=SEED_HEADER)
    skill = load_skill(tmp_path / "seed-style")
    assert (skill.version, skill.tags, skill.match) == (
        "0.11.0",
        ("tool", "anti-hallucination"),
        "any",
    )
    assert skill.compatibility == "Requires dingtalk-agent on PATH" and not skill.warnings
    # any of: a DM is enough, and so is the tool being enabled in a group
    assert skill.applies_to(msgtype="text", scene="dm", provider="openai")
    assert not skill.applies_to(msgtype="text", scene="group", provider="openai")
    tools = frozenset({"local_read_file"})
    assert skill.applies_to(msgtype="text", scene="group", provider="openai", tools=tools)


def test_has_tools_applies_only_with_a_tool_enabled(tmp_path: Path) -> None:
    write_skill(tmp_path, "tooled", {"conditions": ["has-tools"]})
    skill = load_skill(tmp_path / "tooled")
    assert not skill.applies_to(msgtype="text", scene="dm", provider="openai")
    assert skill.applies_to(
        msgtype="text", scene="dm", provider="openai", tools=frozenset({"dingtalk.todo.list"})
    )


def test_an_unknown_condition_is_a_warning_and_the_skill_never_applies(tmp_path: Path) -> None:
    write_skill(tmp_path, "weathered", {"conditions": ["weather:sunny"]})
    skill = load_skill(tmp_path / "weathered")
    assert skill.warnings and "unknown key 'weather'" in skill.warnings[0]
    assert not skill.applies_to(msgtype="text", scene="dm", provider="rules")


def test_skills_list_shows_the_warning_and_exits_0(tmp_path: Path) -> None:
    import io

    from agent.cli.skills import skills_command

    write_skill(tmp_path / "skills", "weathered", {"conditions": ["weather:sunny"]})
    write_skill(tmp_path / "skills", "seed-style", raw=SEED_HEADER)
    config = tmp_path / "dta.toml"
    config.write_text(f"skill_paths = [{str(tmp_path / 'skills')!r}]\n", encoding="utf-8")
    out = io.StringIO()
    assert skills_command("list", config, out) == 0
    text = out.getvalue()
    assert "seed-style 0.11.0" in text and "any of: tool:local_read_file, scene:dm" in text
    assert "warning: conditions.0: condition 'weather:sunny' has unknown key" in text


SEED_SKILLS = Path(__file__).resolve().parents[2] / "shared" / "seed-skills"


@pytest.mark.skipif(not SEED_SKILLS.is_dir(), reason="../shared/seed-skills is not beside the repo")
def test_the_seeds_own_skill_files_load_unchanged() -> None:
    seeds = [s for s in discover([SEED_SKILLS]) if s.name != "basic-behavior"]
    assert sorted(s.name for s in seeds) == [
        "anti-deferred-execution",
        "data-grounding",
        "local-exec",
        "proactive-coding",
        "tool-usage",
    ]
    by_name = {s.name: s for s in seeds}
    assert by_name["tool-usage"].version == "unversioned" and by_name["tool-usage"].priority == 900
    assert any("no version" in note for note in by_name["tool-usage"].notes)
    assert not any(s.warnings for s in seeds)
    assert "anti-hallucination" in by_name["anti-deferred-execution"].tags
    # has-tools holds once a tool is enabled; a tool this dta lacks never matches
    library = SkillLibrary([SEED_SKILLS])
    bare = names(library.for_event("text", "dm", "openai")[0])
    assert "data-grounding" not in bare and "tool-usage" in bare
    tooled = SkillLibrary([SEED_SKILLS], ["dingtalk.todo.create"])
    chosen = names(tooled.for_event("text", "dm", "openai")[0])
    assert {"data-grounding", "anti-deferred-execution", "tool-usage"} <= set(chosen)
    assert "local-exec" not in chosen and "proactive-coding" not in chosen


def test_a_numbered_folder_may_hold_any_name_an_unnumbered_one_must_match(tmp_path: Path) -> None:
    folder = tmp_path / "07-etiquette"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: team-etiquette\ndescription: d\n---\nbody\n", encoding="utf-8"
    )
    skill = load_skill(folder)
    assert skill.name == "team-etiquette" and skill.version == "unversioned"
    other = tmp_path / "etiquette"
    other.mkdir()
    (other / "SKILL.md").write_text(
        "---\nname: team-etiquette\ndescription: d\nversion: '1'\n---\nbody\n", encoding="utf-8"
    )
    with pytest.raises(SkillError, match="must equal the folder name"):
        load_skill(other)
