"""``dta skills list`` and ``dta skills probe``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TextIO

from agent.config import ConfigError, load_settings
from agent.probe import probe
from skills.loader import SkillError, SkillLibrary


def skills_command(command: str, config: Path | None, out: TextIO) -> int:
    try:
        settings = load_settings(config)
        library = SkillLibrary(settings.skill_paths)
    except (ConfigError, SkillError) as exc:
        print(f"dta: {exc}", file=out)
        return 2
    if command == "list":
        for skill in library.skills:
            when = ", ".join(skill.conditions) or "always"
            actions = ", ".join(a.value for a in skill.allowed_actions)
            print(
                f"{skill.name} {skill.version} (priority {skill.priority})\n"
                f"  when: {when}\n  allows: {actions}\n"
                f"  files: {len(skill.files)} in {skill.path}\n  {skill.description}",
                file=out,
            )
        return 0
    result = asyncio.run(probe(settings))
    if result.loaded is None:
        print(f"n/a   {result.provider}: {result.evidence}", file=out)
        return 0
    verdict = "loaded" if result.loaded else "NOT loaded"
    print(
        f"{verdict}: {result.provider} was asked for {result.marker}; it said: {result.evidence}",
        file=out,
    )
    return 0 if result.loaded else 1
