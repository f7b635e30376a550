"""A fake model that takes a real model's time: the model path's benchmark talks to it.

Every request waits a latency drawn from a seeded generator (uniform between ``latency_s``'s
two bounds, in real seconds), then answers the same reply at ``tokens_per_s``: a
``stream: true`` request gets its server-sent events one token apart (a token is
``TOKEN_CHARS`` characters, the unit ``lab.models.fake_model`` counts usage in), an unstreamed one
waits its latency plus the whole answer's writing time and gets the body at once. The
answer's shape and the stream's framing are ``lab.models.fake_model``'s, reused, so the ``openai``
provider meets exactly what it meets in the lab cases.

Each request is timed (``served``): from the request's arrival to the first token (the
end of its latency) and to its last byte, with the key found in its messages (the bench's
message id), so a card's first frame can be set against its model's first token.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from lab.models.fake_model import FakeModel, _error, _text_of
from lab.models.fake_model_stream import stream_completion

TOKEN_CHARS = 4  # lab.models.fake_model counts a token as four characters of the answer


@dataclass
class Served:
    """One request as the model served it (``time.time()`` seconds)."""

    key: str | None
    streamed: bool
    arrived: float
    first_token: float
    done: float = 0.0

    @property
    def seconds(self) -> float:
        return self.done - self.arrived


class PacedModel(FakeModel):
    """Answers ``answer`` (an ActionRequest dict) to every request, at a model's pace."""

    def __init__(
        self,
        answer: dict[str, Any],
        *,
        latency_s: tuple[float, float] = (1.0, 3.0),
        tokens_per_s: float = 30.0,
        seed: int = 0,
        key_pattern: str | None = None,
    ) -> None:
        super().__init__()
        self.answer = answer
        self.latency_s = latency_s
        self.tokens_per_s = tokens_per_s
        self._rng = random.Random(seed)
        self._key = re.compile(key_pattern) if key_pattern else None
        self.served: list[Served] = []
        self.open = 0  # requests being answered now
        self.peak_open = 0

    @property
    def content(self) -> str:
        return json.dumps(self.answer, ensure_ascii=False)

    @property
    def writing_s(self) -> float:
        """How long the answer takes to write at ``tokens_per_s``."""
        return math.ceil(len(self.content) / TOKEN_CHARS) / self.tokens_per_s

    @property
    def mean_latency_s(self) -> float:
        """The expected time of one request: the mean latency plus the writing."""
        low, high = self.latency_s
        return (low + high) / 2 + self.writing_s

    def _find_key(self, messages: list[Any]) -> str | None:
        if self._key is None:
            return None
        for message in messages:
            if isinstance(message, dict):
                found = self._key.search(_text_of(message.get("content")))
                if found:
                    return found.group(0)
        return None

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(messages, list) or not messages:
            return _error(400, "'model' and a non-empty 'messages' list are required.")
        self.requests.append(body)
        streamed = body.get("stream") is True
        # Drawn in arrival order from one seeded generator: the same run, the same waits.
        latency = self._rng.uniform(*self.latency_s)
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        record = Served(self._find_key(messages), streamed, arrived, arrived + latency)
        self.served.append(record)
        try:
            if streamed:
                await asyncio.sleep(latency)
                record.first_token = time.time()
                entry = {"chunk_chars": TOKEN_CHARS, "chunk_delay_s": 1 / self.tokens_per_s}
                completion = self._completion(body, messages, self.content, {})
                response: web.StreamResponse = await stream_completion(request, completion, entry)
            else:  # nothing shows before the whole answer is written
                await asyncio.sleep(latency + self.writing_s)
                record.first_token = time.time()
                completion = self._completion(body, messages, self.content, {})
                response = web.json_response(completion)
        finally:
            self.open -= 1
            record.done = time.time()
        return response
