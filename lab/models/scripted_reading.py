"""How the lab's scripted models read a chat-completions request.

A scripted model (``lab.models.scripted_models``) sees only what a real one sees: the system prompt
(the agent's name, its role, its duties, the output contract), the invocation JSON between
``<invocation>`` tags (the text, who asks, the conversation, media, the knowledge items
with their sources, ``now``), the text files the host shows, the tools offered (their
names, descriptions and JSON schemas), and the tool calls it made with their results.

The plain language sense they decide with is general — no sentence of any case is in it:
the words of a text, tools and requests (``lab.models.scripted_terms``), and numbers, times
and sums (``lab.models.scripted_numbers``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lab.models.scripted_terms import WRITE_VERBS, words_of

_INVOCATION = re.compile(r"<invocation>\s*```json\s*(.*?)\s*```\s*</invocation>", re.DOTALL)
_FILES = re.compile(r"<files>\s*```json\s*(.*?)\s*```\s*</files>", re.DOTALL)
_REFUSED = ("was refused", "could not be used")

# ----------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Offer:
    """One tool offered in ``tools``: its real name (the description starts with it), what
    it says it does and the JSON schema of its arguments."""

    function: str
    name: str
    description: str
    parameters: dict[str, Any]

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        required = self.parameters.get("required")
        return [str(r) for r in required] if isinstance(required, list) else []

    @property
    def writes(self) -> bool:
        """Whether the description says it changes something (a model reads the verb)."""
        first = self.description.split()[0].lower() if self.description.split() else ""
        return first.rstrip("s") in WRITE_VERBS

    @property
    def about_people(self) -> bool:
        words = set(words_of(self.description))
        return bool(words & {"colleague", "person", "people", "user", "staff", "member"})


@dataclass(frozen=True)
class Exchange:
    """A tool call the model made in this answer and what came back."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def data(self) -> Any:
        return self.result.get("data")


@dataclass(frozen=True)
class ModelView:
    """What a model reads from one chat-completions request."""

    agent_name: str
    agent_role: str
    system: str
    invocation: dict[str, Any]
    repair_round: bool  # the host gave back an answer it refused, with the reason
    duties: list[str] = field(default_factory=list)
    offers: list[Offer] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return str(self.invocation.get("text") or "")

    @property
    def event(self) -> dict[str, Any]:
        event = self.invocation.get("event")
        return event if isinstance(event, dict) else {}

    @property
    def in_group(self) -> bool:
        return (self.event.get("conversation") or {}).get("type") == "group"

    @property
    def identity(self) -> dict[str, Any]:
        identity = self.invocation.get("identity")
        return identity if isinstance(identity, dict) else {}

    @property
    def has_material(self) -> bool:
        """Something to look at besides the text: media, a quote, attachments, files."""
        return bool(
            self.invocation.get("media")
            or self.invocation.get("quote")
            or self.event.get("attachments")
            or self.files
        )

    @property
    def grounding(self) -> dict[str, Any]:
        grounding = self.invocation.get("knowledge")
        return grounding if isinstance(grounding, dict) else {}

    @property
    def knowledge_items(self) -> list[dict[str, Any]]:
        items = self.grounding.get("items")
        if not isinstance(items, list):
            return []
        return [i for i in items if isinstance(i, dict) and i.get("kind", "knowledge") != "memory"]

    @property
    def now(self) -> datetime | None:
        now = self.invocation.get("now")
        try:
            return datetime.fromisoformat(str(now.get("iso"))) if isinstance(now, dict) else None
        except ValueError:
            return None

    def offer(self, name: str) -> Offer | None:
        return next((o for o in self.offers if o.name == name), None)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _json_in(pattern: re.Pattern[str], text: str) -> Any:
    found = pattern.search(text)
    if found is None:
        return None
    try:
        return json.loads(found.group(1))
    except json.JSONDecodeError:
        return None


def _duties(system: str) -> list[str]:
    """The bullet list under the system prompt's first second-level heading."""
    duties: list[str] = []
    lines = iter(system.splitlines())
    for line in lines:
        if line.startswith("# ") and duties == [] and "dut" in line.lower():
            break
    for line in lines:
        if line.startswith("#"):
            break
        if line.startswith("- ") and not line[2:].startswith("("):
            duties.append(line[2:].strip())
    return duties


def _offers(tools: Any) -> list[Offer]:
    offers = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        described = str(function.get("description") or "")
        name, sep, rest = described.partition(": ")
        real = name if sep and " " not in name else str(function.get("name", "")).replace("__", ".")
        parameters = function.get("parameters")
        offers.append(
            Offer(
                str(function.get("name", "")),
                real,
                rest if sep else described,
                parameters if isinstance(parameters, dict) else {},
            )
        )
    return offers


def _exchanges(messages: list[dict[str, Any]]) -> list[Exchange]:
    asked: dict[str, tuple[str, dict[str, Any]]] = {}
    exchanges = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = {}
            name = str(function.get("name", "")).replace("__", ".")
            asked[str(call.get("id"))] = (name, arguments if isinstance(arguments, dict) else {})
        if message.get("role") == "tool":
            name, arguments = asked.get(str(message.get("tool_call_id")), ("", {}))
            try:
                result = json.loads(_text_of(message.get("content")))
            except json.JSONDecodeError:
                result = {"ok": False, "error": "unreadable"}
            exchanges.append(Exchange(name, arguments, result if isinstance(result, dict) else {}))
    return exchanges


def read_request(body: dict[str, Any]) -> ModelView:
    """The request as the model sees it; an unreadable invocation reads as an empty one."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(_text_of(m.get("content")) for m in messages if m.get("role") == "system")
    first_line = system.strip().splitlines()[0] if system.strip() else ""
    name, _, role = first_line.removeprefix("You are ").rstrip(".").partition(": ")
    invocation: dict[str, Any] = {}
    files: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = _text_of(message.get("content"))
        found = _json_in(_INVOCATION, content)
        if isinstance(found, dict):
            invocation = found
            shown = _json_in(_FILES, content)
            files = [f for f in shown if isinstance(f, dict)] if isinstance(shown, list) else []
            break
    last = messages[-1] if messages else {}
    repair = last.get("role") == "user" and any(
        w in _text_of(last.get("content")) for w in _REFUSED
    )
    return ModelView(
        name,
        role,
        system,
        invocation,
        repair,
        _duties(system),
        _offers(body.get("tools")),
        _exchanges(messages),
        files,
    )
