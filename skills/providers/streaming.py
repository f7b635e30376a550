"""A model's answer read while it is being written: which action, and its text so far.

A card must be approved by the action gate before it exists, so the host has to know the
kind of action before the first frame. The answer is ActionRequest JSON, so it is read as
JSON as it arrives: ``ActionScanner`` follows the structure incrementally and reports

- ``ReplyText`` — a reply's ``text`` (or ``markdown``) so far, decoded, as soon as its
  ``kind`` is known to be ``reply`` (whichever of the two keys comes first), with the
  request's other fields that are complete by then (``head``: what the gate can judge
  before the answer is whole — a ``target`` written before the text is refused there);
- ``RequestDone`` — a request object as soon as it is complete, parsed, untouched.

Request objects are found where ``prompting.parse_actions`` finds them: the top-level object,
objects one after another (JSON lines), a top-level list, or the ``{"actions": [...]}``
wrapper; anything before the JSON (prose, a code fence) is skipped. Nothing here decides
anything: the complete answer is still parsed by ``parse_actions`` and checked by the gate.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from json.decoder import scanstring
from typing import Any, Protocol, runtime_checkable

from agent.contracts import ActionKind, EnrichedInvocation
from skills.loader import Skill
from skills.providers.base import ProviderReply

_KINDS = frozenset(kind.value for kind in ActionKind)
_BODY_KEYS = ("text", "markdown")
_SPECIAL = re.compile(r'["\\]')
_STRUCTURE = re.compile(r'[{}\[\]:,"]')
# The end of a partial string that is an escape cut in half (or half a surrogate pair).
_CUT_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{0,3}$|\\u[dD][89abAB][0-9a-fA-F]{2}$")


@dataclass(frozen=True)
class RequestDone:
    index: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class ReplyText:
    index: int
    text: str
    head: dict[str, Any] = field(default_factory=dict)  # the request as far as it is known


StreamEvent = RequestDone | ReplyText


@runtime_checkable
class StreamingProvider(Protocol):
    """A provider that can report its answer while writing it (card mode uses this)."""

    name: str

    async def respond_streaming(
        self,
        invocation: EnrichedInvocation,
        skills: Sequence[Skill],
        on_event: Callable[[StreamEvent], None],
    ) -> ProviderReply: ...


@dataclass
class _Frame:
    opener: str  # "{" or "["
    start: int
    request: bool = False  # an object where parse_actions finds requests
    actions: bool = False  # the list under a top-level object's "actions"
    key: str | None = None
    expect_key: bool = False
    index: int | None = None  # set once the object's kind is read
    kind: str | None = None
    body_start: int | None = None
    body_key: str = "text"
    fields: dict[str, Any] = field(default_factory=dict)  # complete fields besides the body
    said: str = ""  # the body text last reported


@dataclass
class ActionScanner:
    """Feed it the answer's text piece by piece; it returns what became known."""

    buf: str = ""
    pos: int = 0
    stack: list[_Frame] = field(default_factory=list)
    in_string: bool = False
    string_start: int = 0
    string_is_key: bool = False
    requests: int = 0

    def feed(self, piece: str) -> list[StreamEvent]:
        self.buf += piece
        events: list[StreamEvent] = []
        while self.pos < len(self.buf):
            if self.in_string:
                if not self._finish_string(events):
                    break
                continue
            if not self.stack:
                found = self.buf.find("{", self.pos), self.buf.find("[", self.pos)
                starts = [at for at in found if at >= 0]
                if not starts:
                    self.pos = len(self.buf)
                    break
                self.pos = min(starts)
            match = _STRUCTURE.search(self.buf, self.pos)
            if match is None:
                self.pos = len(self.buf)
                break
            self.pos = match.end()
            self._structure(match.group(), match.start(), events)
        self._report_body(events)
        return events

    def _structure(self, char: str, at: int, events: list[StreamEvent]) -> None:
        top = self.stack[-1] if self.stack else None
        if char in "{[":
            frame = _Frame(char, at, expect_key=char == "{")
            if char == "{":
                frame.request = top is None or (
                    top.opener == "[" and (len(self.stack) == 1 or top.actions)
                )
            else:
                frame.actions = top is not None and len(self.stack) == 1 and top.key == "actions"
            self.stack.append(frame)
        elif char in "}]":
            if top is None:
                return
            self.stack.pop()
            parent = self.stack[-1] if self.stack else None
            if parent is not None and parent.request and parent.key is not None:
                with contextlib.suppress(json.JSONDecodeError):
                    parent.fields[parent.key] = json.loads(self.buf[top.start : at + 1])
            if top.request and top.index is not None:
                try:
                    raw = json.loads(self.buf[top.start : at + 1], strict=False)
                except json.JSONDecodeError:
                    return
                if isinstance(raw, dict):
                    self._report(top, events)
                    events.append(RequestDone(top.index, raw))
        elif char == ":":
            if top is not None:
                top.expect_key = False
        elif char == ",":
            if top is not None and top.opener == "{":
                top.expect_key = True
        elif char == '"':
            self.in_string = True
            self.string_start = at + 1
            self.string_is_key = top is not None and top.opener == "{" and top.expect_key
            body = top is not None and top.request and not self.string_is_key
            if body and top.key in _BODY_KEYS and top.body_start is None:
                top.body_start, top.body_key = self.string_start, top.key

    def _finish_string(self, events: list[StreamEvent]) -> bool:
        """Move past the current string if its closing quote has arrived (else wait)."""
        at = self.pos
        while True:
            match = _SPECIAL.search(self.buf, at)
            if match is None:
                self.pos = len(self.buf)
                return False
            if match.group() == "\\":
                if match.end() >= len(self.buf):
                    self.pos = match.start()
                    return False
                at = match.end() + 1
                continue
            break
        end = match.start()
        self.pos, self.in_string = end + 1, False
        value = _decode(self.buf, self.string_start)[0] or ""
        top = self.stack[-1] if self.stack else None
        if top is None or top.opener != "{":
            return True
        if self.string_is_key:
            top.key = value
            return True
        if top.request and top.key is not None and top.key not in _BODY_KEYS:
            top.fields[top.key] = value
        if top.request and top.key == "kind" and top.index is None and value in _KINDS:
            top.kind, top.index = value, self.requests
            self.requests += 1
        return True

    def _report_body(self, events: list[StreamEvent]) -> None:
        for frame in self.stack:
            self._report(frame, events)

    def _report(self, frame: _Frame, events: list[StreamEvent]) -> None:
        if frame.kind != ActionKind.REPLY.value or frame.body_start is None:
            return
        assert frame.index is not None
        text = _decode(self.buf, frame.body_start)[0]
        if text is not None and text != frame.said:
            frame.said = text
            events.append(ReplyText(frame.index, text, {**frame.fields, frame.body_key: text}))


def _decode(buf: str, start: int) -> tuple[str | None, bool]:
    """The JSON string value starting at ``start`` (after its quote), decoded as far as it
    has arrived (None when the cut cannot be read yet); True when it is complete. Lenient
    about raw control characters, as models write them."""
    try:
        return scanstring(buf, start, False)[0], True
    except json.JSONDecodeError:
        pass
    partial = buf[start:]
    trailing = len(partial) - len(partial.rstrip("\\"))
    if trailing % 2:
        partial = partial[:-1]
    while (cut := _CUT_ESCAPE.sub("", partial)) != partial:  # half an escape, then a
        partial = cut  # high surrogate left without its pair
    try:
        return json.loads(f'"{partial}"', strict=False), False
    except json.JSONDecodeError:
        return None, False
