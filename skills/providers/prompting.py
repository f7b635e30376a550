"""Prompt rendering and output parsing for model-backed providers.

Kept apart from the HTTP client so both halves stay small and testable without a server.

Rendering: the system prompt carries what the operator trusts (the agent definition, the
selected skills and the output contract); the user prompt carries the invocation as fenced
data. The invocation JSON is escaped so that nothing a sender writes can close the fence:
``<``, ``>`` and backticks become ``\\u003c``, ``\\u003e`` and ``\\u0060``, which is still the
same JSON value.

Parsing: the model's text becomes a list of dicts and nothing more. Fields are never
validated against ``ActionRequest`` or stripped here: a ``target`` the model invents must
reach the action gate intact, so that its ``schema_invalid`` refusal records the attempt.
Only output that cannot be read as requests at all counts as invalid (and earns one repair).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from agent.contracts import ActionKind, AgentDefinition, EnrichedInvocation
from skills.loader import Skill, allowed_actions

PROMPTS_DIR = Path(__file__).parent / "prompts"
SYSTEM_TEMPLATE = "system.md.j2"
USER_TEMPLATE = "user.md.j2"

# Only the first few hundred brace positions are tried when digging JSON out of prose, so
# a huge answer made of braces cannot turn parsing quadratic.
_MAX_CANDIDATES = 200
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```", re.DOTALL)
_FENCE_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "`": "\\u0060"}


class InvalidOutput(ValueError):
    """The model's answer cannot be read as action requests.

    The message says what was wrong in the host's words and never quotes the answer, so it
    can go back to the model in the repair round and into failure evidence safely.
    """


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        autoescape=False,  # Markdown prompts, not HTML; the invocation is escaped by hand
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def permitted_actions(invocation: EnrichedInvocation, skills: Sequence[Skill]) -> list[str]:
    """Kinds this run may answer with: the run's own list narrowed by every selected skill.
    Acts are not among them: a model acts only by calling the tools it is offered."""
    by_skills = set(allowed_actions(skills))
    run = set(invocation.allowed_actions) - {ActionKind.ACT, ActionKind.CONFIRM}
    return [kind.value for kind in ActionKind if kind in run and kind in by_skills]


def invocation_json(invocation: EnrichedInvocation) -> str:
    """The invocation as indented JSON that cannot break out of a tag or a code fence
    (without the session webhook: see ``EnrichedInvocation.for_provider``)."""
    return fenced_json(invocation.for_provider())


def render_system(agent: AgentDefinition, skills: Sequence[Skill], allowed: Sequence[str]) -> str:
    """Who the robot is, its skills (with references) and the output contract."""
    template = _environment().get_template(SYSTEM_TEMPLATE)
    return template.render(agent=agent, skills=list(skills), allowed=list(allowed)).strip()


def fenced_json(value: Any) -> str:
    """Indented JSON in which no ``<``, ``>`` or backtick can close a tag or a fence."""
    text = json.dumps(value, ensure_ascii=False, indent=2)
    # These characters only ever occur inside JSON strings, where \\uXXXX is equivalent.
    for char, escaped in _FENCE_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def render_user(
    invocation: EnrichedInvocation,
    allowed: Sequence[str],
    files: Sequence[dict[str, Any]] = (),
) -> str:
    """The invocation, fenced as data, plus the allowed actions restated by the host.

    ``files`` are text files of the message (name, type, text, whether it was cut), shown
    fenced as data the same way.
    """
    template = _environment().get_template(USER_TEMPLATE)
    return template.render(
        invocation_json=invocation_json(invocation),
        allowed=list(allowed),
        files_json=fenced_json(list(files)) if files else "",
    ).strip()


def repair_prompt(problem: str) -> str:
    """The one follow-up a model gets after an unusable answer: what was wrong, and the ask."""
    return (
        f"Your previous answer could not be used: {problem}.\n"
        "Answer again with JSON only, no prose and no code fences: one ActionRequest object "
        'such as {"kind": "reply", "text": "..."}, or {"actions": [...]} for an ack '
        'followed by one final action. Every action needs a string "kind".'
    )


# What a model is told when the action gate refused its answer as untrue (its one repair
# round, after the answer is given back to it as it was).
_REFUSAL_ASKS = {
    "unbacked_claim": (
        "It says something was done (sent, told, forwarded, created, booked, approved) that "
        "no act of this run did: no receipt of that kind of act, for those people and that "
        "thing, backs it. Say only what is true: what was done (as its receipt says), what "
        "was not, and — if a tool you have does it — do it now instead of saying it."
    ),
    "raw_tool_output": (
        "It pastes a tool's raw output: its field names or someone's staff id. Say what the "
        "result means in plain words a colleague would use: people by name, dates and states "
        "as words, no field names, no ids."
    ),
    "ungrounded_figure": (
        "It gives a figure (an amount, count, percentage, date or duration) that none of the "
        "sources you were given (the knowledge items, the tool results) nor the question "
        "holds. Give the sources' own figures as they are written, or show the computation "
        "step by step from them (180 × 2 = 360); where the sources give no figure, say so."
    ),
    "content_too_large": (
        "It is too long to send as a chat message. Give the same answer much shorter: the "
        "essentials only, a few lines."
    ),
    "attachment_unsupported": (
        "An attachment is not a picture or file DingTalk takes (images png, jpg, gif, bmp; "
        "files pdf, zip, docx, xlsx, pptx, rar, doc, xls, ppt), or its base64 is broken. "
        "Answer again without it, with what matters said in the text."
    ),
    "deferred_promise": (
        "It promises to come back later, and nothing will: no follow-up is opened. Answer "
        "now with what you know, say plainly what you do not, or set a reminder the person "
        "asked for."
    ),
    "foreign_image": (
        "It embeds an image from outside DingTalk (a web address or a data: URI): each "
        "reader's client would fetch it and tell that host who read the message, and when. "
        "Answer again without it: describe the picture in words, give the page as a plain "
        "link [text](url), or send the picture as an attachment."
    ),
}


def refusal_prompt(reason: str, detail: str) -> str:
    """The repair round's ask after the action gate refused the answer (``reason`` is its
    refusal code: untrue, or too long)."""
    why = _REFUSAL_ASKS.get(reason, "")
    return (
        f"Your previous answer was refused and not sent ({reason}: {detail}). {why}\n"
        "Answer again with JSON only: one ActionRequest object."
    )


def repair_messages(invocation: EnrichedInvocation) -> list[dict[str, Any]]:
    """On the repair round: the refused answer as the model gave it, then why it was
    refused; nothing otherwise."""
    repair = invocation.repair
    if repair is None:
        return []
    previous = json.dumps(
        repair.previous[0] if len(repair.previous) == 1 else {"actions": repair.previous},
        ensure_ascii=False,
    )
    return [
        {"role": "assistant", "content": previous},
        {"role": "user", "content": refusal_prompt(repair.reason, repair.detail)},
    ]


def parse_actions(content: Any) -> list[dict[str, Any]]:
    """The model's answer as a list of request dicts, fields untouched; else InvalidOutput."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidOutput("the answer was empty")
    return _as_requests(_extract_json(content.strip()))


def _extract_json(text: str) -> Any:
    """The JSON value in ``text``: whole, inside a code fence, or inside surrounding prose."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        first_error = exc
    for fenced in _FENCE.findall(text):
        try:
            return json.loads(fenced.strip())
        except json.JSONDecodeError:
            continue
    found = _embedded_json(text)
    if found is not None:
        return found
    raise InvalidOutput(
        f"the answer is not valid JSON ({first_error.msg} at line {first_error.lineno} "
        f"column {first_error.colno})"
    )


def _embedded_json(text: str) -> Any:
    """The first object or array inside prose; consecutive objects (JSON lines) are joined.

    Models sometimes print an ack and a reply as two objects one after the other; keeping
    only the first would silently drop the final action.
    """
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)][:_MAX_CANDIDATES]
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
        if not isinstance(value, dict):
            continue  # e.g. a "[1]" footnote in the prose: not the answer
        objects = [value]
        while True:
            rest = text[end:]
            skipped = len(rest) - len(rest.lstrip(" \t\r\n,"))
            if not rest[skipped:].startswith("{"):
                break
            try:
                more, end = decoder.raw_decode(text, end + skipped)
            except json.JSONDecodeError:
                break
            if not isinstance(more, dict):
                break
            objects.append(more)
        return objects[0] if len(objects) == 1 else objects
    return None


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _as_requests(value: Any) -> list[dict[str, Any]]:
    """Accept one object, a list of objects, or ``{"actions": [...]}``; check only ``kind``."""
    if isinstance(value, dict) and "kind" not in value and "actions" in value:
        extra = sorted(k for k in value if k != "actions")
        if extra:
            raise InvalidOutput(
                'the {"actions": [...]} wrapper may hold only "actions", but it also has '
                + ", ".join(json.dumps(k) for k in extra)
            )
        value = value["actions"]
        if not isinstance(value, list):
            raise InvalidOutput(f'"actions" is {_type_name(value)}, not a list of objects')
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise InvalidOutput(f"the answer is {_type_name(value)}, not an object or a list")
    if not items:
        raise InvalidOutput(
            'the answer holds no action; to say nothing, use {"kind": "silence", "reason": "..."}'
        )
    for number, item in enumerate(items, start=1):
        where = "the answer" if len(items) == 1 and item is value else f"action {number}"
        if not isinstance(item, dict):
            raise InvalidOutput(f"{where} is {_type_name(item)}, not an object")
        if "kind" not in item:
            raise InvalidOutput(f'{where} has no "kind" field')
        if not isinstance(item["kind"], str):
            raise InvalidOutput(f'{where} has a "kind" that is {_type_name(item["kind"])}')
    return list(items)
