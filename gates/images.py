"""The images a Markdown message embeds, and whether each is DingTalk's own media (pure).

A reader's client fetches an embedded image when it shows the message, so an image from any
other host — a tracking pixel, ``![](https://tracker.example/p.gif?u=…)`` — tells that host
who read the message, and when. DingTalk shows a picture it holds by its media id: the
upload answers ``{errcode: 0, media_id: "@lA…"}``, and "images work as markdown
``![alt](@mediaId)``" (../shared/dingtalk-workspace-apis.md §8 "Outbound media";
dingtalk-platform.md: "an image can go as markdown ``![](mediaId)``"). ``sampleImageMsg``
takes a URL too, but that is another message type, and the docs name no DingTalk media host:
so only a media id passes, and an http(s) URL to any host, a protocol-relative ``//host``, a
``data:`` URI or a relative path is foreign.

Found: inline ``![alt](url "title")``; reference ``![alt][ref]``, ``![alt][]`` and ``![alt]``
with a ``[ref]: url`` definition; HTML ``<img src=…>`` (and ``srcset``, and the other tags a
client loads a picture for). Markdown shows code as it is written, so image syntax inside a
fenced block or an inline code span embeds nothing; but a code span or fence that the finder
sees and the renderer does not would hide an image the reader is shown, so code counts only
where no renderer can read it otherwise:
- nowhere when the text holds any HTML (a tag or an autolink outranks code);
- a fence only when every fence line in the text starts in the first column (one in a list
  item or a quote ends with it; an indented one may close a fence or not);
- a code span only when it is the one span of its paragraph, on one line, with no escape,
  bracket, ``|`` (a table cell) or ``]:`` (a definition) around it to claim its backticks.
Elsewhere too the finder errs towards an image: one whose parenthesis never closes, or whose
address has a space in it, is still judged, since a lenient renderer (or the next frame of a
streamed card) shows it.

    foreign_images("hi ![](https://t.example/p.gif?u=u1)")   # -> ["t.example"]
    foreign_images("![图](@lADPDe7s2ySi18PNA6XNBXg)")          # -> []
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

# A media id as the upload gives it: "@lA" then base64url characters. No "/", ":" or ".",
# so a client cannot resolve it to a host of anyone's choosing.
_MEDIA_ID = re.compile(r"@lA[A-Za-z0-9_-]+")

# Anything a Markdown renderer could take for HTML (a tag, a comment, an autolink).
_HTML = re.compile(r"<[A-Za-z/!?]")
# A line that looks like a fence, with what stands before it (indentation, a quote or list
# marker): only first-column fences are honoured, and only when every such line is one.
_FENCE_LINE = re.compile(r"^((?:[ \t>]|[*+-][ \t]|\d{1,9}[.)][ \t])*)(`{3,}|~{3,})")
# A fence opens with three or more backticks (an info string without backticks) or tildes;
# it closes with a line of at least as many of the same and nothing after but white space.
_FENCE_OPEN = re.compile(r"(`{3,})[^`]*|(~{3,}).*")
_BACKTICKS = re.compile(r"`+")
# ``[label]: destination`` wherever it stands (in a quote or a list item too, the address
# maybe on the next line): one found where Markdown would take none only makes more images
# judged, never fewer (and code spans are not read at all where a definition may be).
_DEFINITION = re.compile(r"(?<![\\!])\[((?:\\.|[^\\\[\]])+)\]:[ \t]*\n?[ \t>]*(<[^>\n]*>|\S+)")
# The tags a client loads a picture for (``<image>`` is read as ``<img>`` by HTML parsers),
# to the end of the text when the tag is not closed yet.
_TAG = re.compile(r"<(?:img|image|source|input|video)\b([^>]*)", re.IGNORECASE)
_SOURCE_ATTR = re.compile(
    r"\b(src|srcset|poster|href)\s*=\s*(\"[^\"]*\"?|'[^']*'?|[^\s\"'>]+)", re.IGNORECASE
)
# What is read of one inline address: enough for any host, far more than a media id (so a
# longer one is foreign anyway), and a text of a thousand ``![a](`` stays quick to judge.
MAX_ADDRESS_CHARS = 512
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # Markdown's backslash escapes (ASCII punctuation)


def is_dingtalk_media(address: str) -> bool:
    """Is ``address`` (decoded) a DingTalk media id, the only source a message may show?"""
    return _MEDIA_ID.fullmatch(address) is not None


def foreign_images(markdown: str) -> list[str]:
    """Where each image that is not DingTalk media comes from (``source_of``), once each, in
    the order they appear; empty when every image is a media id (or there is none)."""
    seen: list[str] = []
    for address in embedded_images(markdown):
        if not is_dingtalk_media(address):
            where = source_of(address)
            if where not in seen:
                seen.append(where)
    return seen


def source_of(address: str) -> str:
    """The host an image would be fetched from, or what kind of address it is: never its
    path or query, which may carry who is reading (``?u=…``)."""
    address = address.strip()
    if address.lower().startswith("data:"):
        return "a data: URI"
    try:  # browsers read "\" as "/" in a web address
        parts = urlsplit(address.replace("\\", "/"))
        host = parts.hostname
    except ValueError:
        return "an address that is not a media id"
    if host:
        return host
    if parts.scheme:
        return f"a {parts.scheme.lower()}: address"
    return "an address that is not a media id"


def embedded_images(markdown: str) -> list[str]:
    """Every image address ``markdown`` embeds, decoded as a renderer reads it (entities,
    backslash escapes), in order; empty addresses fetch nothing and are left out."""
    text = _without_code(markdown)
    definitions = _definitions(text)
    closing = _bracket_pairs(text)
    found: list[tuple[int, str]] = []
    for match in re.finditer(r"!\[", text):
        start = match.start()
        if _escaped(text, start):
            continue
        found += [(start, a) for a in _markdown_image(text, start + 1, closing, definitions)]
    for tag in _TAG.finditer(text):
        for attr in _SOURCE_ATTR.finditer(tag.group(1)):
            value = html.unescape(attr.group(2).strip("\"'"))
            if attr.group(1).lower() == "srcset":  # "a.png 1x, b.png 2x": each is fetched
                found += [(tag.start(), c.split()[0]) for c in value.split(",") if c.split()]
            else:
                found.append((tag.start(), value))
    return [address for _, address in sorted(found, key=lambda f: f[0]) if address.strip()]


def _markdown_image(
    text: str, bracket: int, closing: dict[int, int], definitions: dict[str, list[str]]
) -> list[str]:
    """The addresses of the image whose ``[`` is at ``bracket`` (after its ``!``): one for
    an inline image, every definition of its label for a reference; none when it is not an
    image after all (no closing ``]``, an undefined label)."""
    alt_end = closing.get(bracket)
    if alt_end is None:
        return []
    alt = text[bracket + 1 : alt_end]
    rest = alt_end + 1
    while rest < len(text) and text[rest] in " \t":  # lenient renderers allow "] ("
        rest += 1
    if text.startswith("(", rest):
        return [_decoded(_destination(text, rest + 1))]
    labels = [alt]
    if text.startswith("[", rest):
        ref_end = closing.get(rest)
        if ref_end is not None and text[rest + 1 : ref_end].strip():
            labels.insert(0, text[rest + 1 : ref_end])
    for label in labels:  # the reference's own label, else its alt text as the label
        addresses = definitions.get(_label(label))
        if addresses:
            return addresses
    return []


def _destination(text: str, start: int) -> str:
    """An inline image's address, from just after its ``(``: ``<…>``, or up to white space
    or the ``)`` that closes it (balanced parentheses and escapes kept, as Markdown does)."""
    i = start
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if text.startswith("<", i):
        end = text.find(">", i)
        if end != -1 and "\n" not in text[i:end]:
            return text[i + 1 : end]
    depth, j, end = 0, i, min(len(text), i + MAX_ADDRESS_CHARS)
    while j < end and not text[j].isspace():
        char = text[j]
        if char == "\\":
            j += 2
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                break
            depth -= 1
        j += 1
    return text[i:j]


def _bracket_pairs(text: str) -> dict[int, int]:
    """Where the ``]`` that closes each ``[`` is (nested brackets allowed, escaped ones not
    counted), found in one pass however many there are."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            opened.append(i)
        elif char == "]" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


def _definitions(text: str) -> dict[str, list[str]]:
    """Each label's definitions, every one of them: Markdown takes the first, a lenient
    renderer may take another, and any of them may be the one fetched."""
    found: dict[str, list[str]] = {}
    for match in _DEFINITION.finditer(text):
        address = match.group(2)
        if address.startswith("<") and address.endswith(">"):
            address = address[1:-1]
        found.setdefault(_label(match.group(1)), []).append(_decoded(address))
    return found


def _without_code(markdown: str) -> str:
    """``markdown`` with the code no renderer could read otherwise blanked (see above)."""
    if _HTML.search(markdown):
        return markdown
    return _without_code_spans(_without_fences(markdown))


def _without_fences(text: str) -> str:
    """Fenced blocks blanked, fence lines and all (one never closed runs to the end, as it
    does when rendered); nothing when a fence line stands anywhere but the first column."""
    lines = text.split("\n")
    if any(m.group(1) for m in map(_FENCE_LINE.match, lines) if m is not None):
        return text
    kept: list[str] = []
    fence: str | None = None
    for line in lines:
        if fence is None:
            opened = _FENCE_OPEN.fullmatch(line)
            if opened is None:
                kept.append(line)
                continue
            fence = opened.group(1) or opened.group(2)
        elif re.fullmatch(rf"{re.escape(fence[0])}{{{len(fence)},}}[ \t]*", line):
            fence = None
        kept.append("")
    return "\n".join(kept)


def _without_code_spans(text: str) -> str:
    """Inline code spans blanked, where the span is beyond doubt: nothing in its paragraph
    could make a renderer pair its backticks otherwise."""
    if "|" in text or "]:" in text:
        return text
    chars = list(text)
    for begin, stop in _paragraphs(text):
        runs = list(_BACKTICKS.finditer(text, begin, stop))
        if len(runs) < 2:
            continue
        first, last = runs[0], runs[-1]
        size = len(first.group(0))
        if len(last.group(0)) != size or any(len(r.group(0)) == size for r in runs[1:-1]):
            continue  # the first run closes on the next one of its length: not the last
        start, end = first.start(), last.end()
        before, after = text[begin:start], text[end:stop]
        if "\n" in text[start:end] or before.endswith("\\"):
            continue
        if any(bracket in before + after for bracket in "[]"):
            continue  # a link's address or title outside the span may hold its backtick
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """Where each run of non-blank lines starts and ends (a code span never crosses a
    blank line)."""
    found: list[tuple[int, int]] = []
    begin: int | None = None
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            begin = offset if begin is None else begin
        elif begin is not None:
            found.append((begin, offset))
            begin = None
        offset += len(line) + 1
    if begin is not None:
        found.append((begin, len(text)))
    return found


def _escaped(text: str, at: int) -> bool:
    """Is the character at ``at`` escaped (after an odd number of backslashes)?"""
    backslashes = 0
    while at - backslashes - 1 >= 0 and text[at - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _decoded(address: str) -> str:
    """An address as a renderer reads it: Markdown's escapes undone, entities decoded."""
    return html.unescape(_ESCAPED.sub(r"\1", address))


def _label(label: str) -> str:
    """A reference label as Markdown matches it: case-folded, white space collapsed."""
    return " ".join(label.split()).casefold()
