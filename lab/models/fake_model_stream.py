"""The fake model's streamed answers: ``stream: true`` served as OpenAI's server-sent events.

``data: {chat.completion.chunk}`` lines, the answer's text cut into pieces of
``chunk_chars`` characters (6 unless the script entry says otherwise) sent ``chunk_delay_s``
apart (0.01 s), a last chunk with the finish reason and the usage, then ``data: [DONE]``.
A script entry with ``"stream": false`` answers a streaming request with the plain JSON
body instead, as servers that do not stream do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

CHUNK_CHARS = 6
CHUNK_DELAY_S = 0.01


def _event(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()


async def stream_completion(
    request: web.Request, completion: dict[str, Any], entry: dict[str, Any]
) -> web.StreamResponse:
    """Serve ``completion`` (a whole ``chat.completion``) as a stream of chunks."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    head = {key: completion[key] for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    content = completion["choices"][0]["message"]["content"]
    size = max(1, int(entry.get("chunk_chars", CHUNK_CHARS)))
    delay = float(entry.get("chunk_delay_s", CHUNK_DELAY_S))
    try:
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        await response.write(_event({**head, "choices": [first]}))
        for start in range(0, len(content), size):
            piece = {"index": 0, "delta": {"content": content[start : start + size]}}
            await response.write(_event({**head, "choices": [{**piece, "finish_reason": None}]}))
            if delay:
                await asyncio.sleep(delay)
        stop = {"index": 0, "delta": {}, "finish_reason": "stop"}
        last: dict[str, Any] = {**head, "choices": [stop]}
        if "usage" in completion:
            last["usage"] = completion["usage"]
        await response.write(_event(last))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionError, asyncio.CancelledError):
        pass  # the client stopped reading (a card stopped mid-answer): nothing to finish
    return response
