"""Where an image still being written starts in a streamed text (pure).

A streamed card shows each frame as it comes, so an image whose address is not complete yet
(``![](https://tra``) cannot be judged by ``gates/images.py`` until it ends: the frame is
held back from where it starts (``gates/frames.py``), and judged whole once it is written.
"""

from __future__ import annotations

import html
import re

from gates.images import (
    _SOURCE_ATTR,
    _TAG,
    MAX_ADDRESS_CHARS,
    _bracket_pairs,
    _destination,
    _escaped,
    is_dingtalk_media,
)

# How far back from the end of a streamed text an unfinished image is looked for (its alt
# text and its address): one begun further back is judged as it stands, like any other.
OPEN_IMAGE_CHARS = 2 * MAX_ADDRESS_CHARS
_TAG_NAMES = ("img", "image", "source", "input", "video")
_TAG_START = re.compile(r"<([A-Za-z]*)\Z")
# ``[label]:`` at the end of the text with its address not ended yet (no white space after).
# Only while that is ASCII, as an address is: 「[注意]:今天下午…」 is prose, not held back.
_OPEN_DEFINITION = re.compile(r"(?<![\\!])\[(?:\\.|[^\\\[\]])+\]:[ \t]*\n?[ \t>]*[!-~]*\Z")


def open_image_start(markdown: str) -> int | None:
    """Where the image that ``markdown`` ends in the middle of begins, or None when it ends
    in none: ``!``, ``![alt``, ``![alt](`` and an address not ended yet (``![](@lA``,
    ``![](https://trac``), a picture tag not closed with every source so far a media id, a
    reference definition whose address is still being written.

    A streamed card's frame holds such a tail back (``gates.frames.unsafe_tail``) until a
    later text ends it, and the image is judged then, whole: judged in part, ``![](@l`` is
    no media id and would be refused, and a foreign address would be refused without its
    host known. What is held is not shown, so nothing reaches the card by it; an image in
    the alt text of an unfinished one waits with it, and the finished answer is judged whole.

        open_image_start("见图 ![](@lADP")         # -> 3
        open_image_start("见图 ![](@lADP) 好")     # -> None
    """
    window = max(0, len(markdown) - OPEN_IMAGE_CHARS)
    starts = [
        start
        for start in (
            _open_markdown_image(markdown, window),
            _open_tag(markdown, window),
            _open_definition(markdown, window),
        )
        if start is not None
    ]
    return min(starts, default=None)


def _open_markdown_image(text: str, window: int) -> int | None:
    """The first ``!`` (in the window) of a Markdown image the text ends inside of."""
    closing = _bracket_pairs(text)
    for match in re.finditer("!", text[window:]):
        start = window + match.start()
        if not _escaped(text, start) and _markdown_image_open(text, start + 1, closing):
            return start
    return None


def _markdown_image_open(text: str, bracket: int, closing: dict[int, int]) -> bool:
    """Does the text end inside the image whose ``[`` is at ``bracket`` (after its ``!``)?"""
    if bracket == len(text):
        return True  # "!" may begin "!["
    if text[bracket] != "[":
        return False
    alt_end = closing.get(bracket)
    if alt_end is None:
        return True  # the alt text is still being written
    rest = alt_end + 1
    while rest < len(text) and text[rest] in " \t":
        rest += 1
    if rest == len(text):
        return True  # "(" or "[" may follow
    if text[rest] == "[":  # a reference: open while its label is
        return closing.get(rest) is None
    if text[rest] != "(":
        return False
    i = rest + 1
    while i < len(text) and text[i] in " \t\n":
        i += 1
    written = text[i:]
    if len(written) >= MAX_ADDRESS_CHARS:
        return False  # as much as is ever read of an address: judged as it is
    if written.startswith("<"):
        return ">" not in written and "\n" not in written  # read as it stands once either is
    return _destination(text, i) == written  # nothing has ended the address yet


def _open_tag(text: str, window: int) -> int | None:
    """The ``<`` of a picture tag not closed yet, every source of it so far a media id (or
    its last one still being written)."""
    started = _TAG_START.search(text, window)
    if started is not None and any(n.startswith(started.group(1).lower()) for n in _TAG_NAMES):
        return started.start()  # "<", "<im": the tag's name is still being written
    opened = text.rfind("<", window)
    if opened == -1:
        return None
    tag = _TAG.match(text, opened)
    if tag is None or tag.end() != len(text):
        return None  # not a picture tag, or closed by ">"
    attributes = tag.group(1)
    for attr in _SOURCE_ATTR.finditer(attributes):
        value = attr.group(2)
        ended = attr.end() < len(attributes)
        if value[0] in "\"'":
            ended = len(value) > 1 and value[-1] == value[0]
        value = html.unescape(value.strip("\"'"))
        if attr.group(1).lower() == "srcset":
            candidates = [c.split()[0] if c.split() else "" for c in value.split(",")]
        else:
            candidates = [value]
        if not ended:
            candidates.pop()  # still being written: judged once it has ended
        if not all(not c or is_dingtalk_media(c) for c in candidates):
            return None  # foreign already, whatever follows
    return opened


def _open_definition(text: str, window: int) -> int | None:
    """The ``[`` of a reference definition whose address is still being written."""
    match = _OPEN_DEFINITION.search(text, window)
    if match is None or len(text) - match.start() >= MAX_ADDRESS_CHARS:
        return None
    return match.start()
