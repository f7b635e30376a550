"""The message's media in the form a chat-completions model can use.

- pictures, for a model that reads images (``openai_vision``), as ``image_url`` content
  parts carrying the bytes as a ``data:`` URL (the model never fetches anything itself);
- small text-like files (txt, md, csv, json, by their sniffed type), as data the user
  prompt shows fenced, cut to ``max_file_chars`` and marked ``truncated`` when cut.

The text of PDF, Word and Excel files is in the invocation itself (``documents``, read by
the host: ``agent/run/documents.py``). Anything else (video, audio without recognition,
pictures for a text-only model) is only described in the invocation's ``media`` list, so
the model can say what it did not see.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from agent.contracts import EnrichedInvocation, MediaItem, MediaStatus

# what one picture may weigh as a content part (providers refuse far larger requests)
MAX_IMAGE_BYTES = 8 * 1024 * 1024


def _bytes(item: MediaItem) -> bytes | None:
    if item.status is not MediaStatus.FETCHED or not item.stored_at:
        return None
    try:
        return Path(item.stored_at).read_bytes()
    except OSError:
        return None


def text_files(invocation: EnrichedInvocation, max_chars: int) -> list[dict[str, Any]]:
    """Each readable text file as ``{media_id, name, mime, text, truncated}``."""
    files = []
    for item in invocation.media:
        mime = item.mime or ""
        if not (mime.startswith("text/") or mime == "application/json"):
            continue
        data = _bytes(item)
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace")
        files.append(
            {
                "media_id": item.media_id,
                "name": item.file_name or item.path,
                "mime": mime,
                "part_of": item.part_of,
                "text": text[:max_chars],
                "truncated": len(text) > max_chars,
                **({"original_length": len(text)} if len(text) > max_chars else {}),
            }
        )
    return files


def image_parts(invocation: EnrichedInvocation) -> list[dict[str, Any]]:
    """``image_url`` content parts for the fetched pictures, in the message's order."""
    parts = []
    for item in invocation.media:
        if not item.is_image or (item.size or 0) > MAX_IMAGE_BYTES:
            continue
        data = _bytes(item)
        if data is None:
            continue
        url = f"data:{item.mime};base64,{base64.b64encode(data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def user_content(prompt: str, invocation: EnrichedInvocation, vision: bool) -> str | list[Any]:
    """The user message's content: the prompt alone, or the prompt and the pictures."""
    images = image_parts(invocation) if vision else []
    if not images:
        return prompt
    return [{"type": "text", "text": prompt}, *images]
