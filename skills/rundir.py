"""A prepared run directory: what an external agent (or a person debugging) needs to know.

    response-gate.json         the response gate's verdict (engage only grants the origin)
    enriched-invocation.json   the event with quote, burst, identity, continuation, media
    media/<n>-<name>           the message's fetched pictures and files (``media[].path``)
    skills.json                the frozen skill snapshot (names + content hashes)
    skills/<name>/...          the selected skills' files, to be read (SKILL.md, references)
    CONTEXT.md                 the same, readable, with the output contract

The ``command`` provider runs its command inside this directory; with ``run_dir`` set in
the configuration, the daemon writes one per run for inspection.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader

from agent.contracts import EnrichedInvocation, SkillSnapshot

_ENV = Environment(loader=PackageLoader("skills", "templates"), autoescape=False)


def _fenced(text: str | None) -> str:
    """A Markdown code block that ``text`` cannot close: the fence is longer than any run
    of backticks inside it, so message text never turns into headings or instructions."""
    body = text or ""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


_ENV.filters["fenced"] = _fenced


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _copy_media(path: Path, invocation: EnrichedInvocation) -> None:
    """Each fetched file at its ``path`` inside the run directory, for an external agent."""
    for item in invocation.media:
        if not (item.stored_at and item.path) or not Path(item.stored_at).is_file():
            continue
        target = path / item.path
        if target.exists() and target.resolve() == Path(item.stored_at).resolve():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.stored_at, target)


def prepare_run_dir(
    path: Path, invocation: EnrichedInvocation, skills: Sequence[Any], snapshot: SkillSnapshot
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if invocation.response_gate is not None:
        _write_json(path / "response-gate.json", invocation.response_gate.to_dict())
    _write_json(path / "enriched-invocation.json", invocation.for_provider())
    _copy_media(path, invocation)
    _write_json(path / "skills.json", {"digest": snapshot.digest, **snapshot.to_dict()})
    for skill in skills:
        # From what was loaded (and hashed) at start-up, not from disk again: what the
        # reader sees is exactly what the receipts' skill snapshot names.
        folder = path / "skills" / skill.name
        (folder / "references").mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(skill.body, encoding="utf-8")
        for relative, text in skill.references.items():
            (folder / relative).write_text(text, encoding="utf-8")
    context = _ENV.get_template("CONTEXT.md.j2").render(
        inv=invocation, skills=skills, snapshot=snapshot
    )
    (path / "CONTEXT.md").write_text(context, encoding="utf-8")
    return path
