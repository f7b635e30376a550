"""``dta skills list`` and ``dta skills probe``: what the daemon would load, and whether the
configured provider really sees it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TextIO

from agent.cli.probe import ProbeResult, probe
from agent.config import ConfigError, Settings, load_settings
from skills.loader import SkillError, SkillLibrary

# Why the probe cannot apply to `rules`, and what proves its loading instead.
RULES_PROBE = (
    "not applicable to the rules provider: it follows fixed rules in code and never reads"
    " skill text, so no marker can come back. What it answers from is its code, the agent"
    " definition and knowledge_dir — check those with `dta dev`. The probe applies to the"
    " openai and command providers, which are given the skills' text."
)


def probe_verdict(result: ProbeResult) -> tuple[str, str]:
    """(verdict, explanation): ``not applicable``, ``loaded`` or ``NOT loaded``."""
    if result.loaded is None:
        return "not applicable", RULES_PROBE
    if result.loaded:
        return "loaded", f"{result.provider} was asked for {result.marker} and returned it"
    return "NOT loaded", (
        f"{result.provider} was asked for {result.marker}; it said: {result.evidence}"
    )


def _listing(settings: Settings, library: SkillLibrary) -> list[dict[str, Any]]:
    return [
        {
            "name": skill.name,
            "version": skill.version,
            "priority": skill.priority,
            "when": list(skill.conditions),
            "allows": [a.value for a in skill.allowed_actions],
            "narrows": skill.narrows_actions,
            "tools": list(skill.tools) if skill.tools is not None else None,
            "files": len(skill.files),
            "path": str(skill.path),
            "description": skill.description,
            "tags": list(skill.tags),
            "match": skill.match,
            "compatibility": skill.compatibility,
            "warnings": list(skill.warnings),
            "notes": list(skill.notes),
        }
        for skill in library.skills
    ]


def skills_command(command: str, config: Path | None, out: TextIO, as_json: bool = False) -> int:
    try:
        settings = load_settings(config)
        library = SkillLibrary(settings.skill_paths, settings.tools)
    except (ConfigError, SkillError) as exc:
        print(f"dta: {exc}", file=out)
        return 2
    if command == "list":
        skills = _listing(settings, library)
        if as_json:
            print(json.dumps(skills, ensure_ascii=False, indent=2), file=out)
            return 0
        for s in skills:
            joined = f" {s['match']} of: " if len(s["when"]) > 1 else " "
            print(
                f"{s['name']} {s['version']} (priority {s['priority']})\n"
                f"  when:{joined}{', '.join(s['when']) or 'always'}\n"
                f"  allows: {', '.join(s['allows'])}"
                f"{'' if s['narrows'] else ' (does not narrow)'}\n"
                f"  tools: {', '.join(s['tools']) if s['tools'] is not None else 'any enabled'}\n"
                f"  files: {s['files']} in {s['path']}\n  {s['description']}",
                file=out,
            )
            for warning in s["warnings"]:
                print(f"  warning: {warning}", file=out)
            for note in s["notes"]:
                print(f"  note: {note}", file=out)
        return 0
    result = asyncio.run(probe(settings))
    verdict, explanation = probe_verdict(result)
    if as_json:
        document = {
            "provider": result.provider,
            "verdict": verdict,
            "loaded": result.loaded,
            "marker": result.marker,
            "evidence": result.evidence,
            "explanation": explanation,
        }
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
    else:
        print(f"{verdict}: {explanation}", file=out)
    return 1 if result.loaded is False else 0
