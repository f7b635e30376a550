"""A prepared run directory: what an external agent (or a person debugging) needs to know.

    response-gate.json         the response gate's verdict (engage only grants the origin)
    enriched-invocation.json   the event with quote, burst, identity, continuation
    skills.json                the frozen skill snapshot (names + content hashes)
    skills/<name>/...          the selected skills' files, to be read (SKILL.md, references)
    CONTEXT.md                 the same, readable, with the output contract

The ``command`` provider runs its command inside this directory; with ``run_dir`` set in
the configuration, the daemon writes one per run for inspection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader

from agent.contracts import EnrichedInvocation, SkillSnapshot

_ENV = Environment(loader=PackageLoader("skills", "templates"), autoescape=False)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def prepare_run_dir(
    path: Path, invocation: EnrichedInvocation, skills: Sequence[Any], snapshot: SkillSnapshot
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if invocation.response_gate is not None:
        _write_json(path / "response-gate.json", invocation.response_gate.to_dict())
    _write_json(path / "enriched-invocation.json", invocation.to_dict())
    _write_json(path / "skills.json", {"digest": snapshot.digest, **snapshot.to_dict()})
    for skill in skills:
        folder = getattr(skill, "path", None)
        for relative in getattr(skill, "files", {}):
            target = path / "skills" / skill.name / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((folder / relative).read_bytes())
    context = _ENV.get_template("CONTEXT.md.j2").render(
        inv=invocation, skills=skills, snapshot=snapshot
    )
    (path / "CONTEXT.md").write_text(context, encoding="utf-8")
    return path
