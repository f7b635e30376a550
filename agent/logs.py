"""Structured logs: one JSON object per line, with run ids, and never a secret.

Every record passes a redaction filter that replaces the configured secret values,
session-webhook tokens and access tokens wherever they appear (the rendered message,
extra fields, dict values under a token's name), so a careless ``log.info(url)`` cannot
leak them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_SESSION = re.compile(r"(session=)[^&\s\"'\\]+")
# An access token after its name in any of the shapes it travels in: the header
# (``x-acs-dingtalk-access-token: ...``), a query (``?access_token=...``), JSON
# (``"accessToken": "..."``, also escaped inside a JSON string) or a repr of headers
# (``(b'x-acs-dingtalk-access-token', b'...')``). The name must be followed by a separator,
# so an identifier such as ``accessTokenExpiry`` is left alone.
_TOKEN_HEADER = re.compile(
    r"(access[-_]?token(?:[\\\"'=:,\s]|%22|%3A|%3D)+(?:b[\\\"'])?)[A-Za-z0-9._~+/-]{8,}",
    re.IGNORECASE,
)
# Cheap first look: text without either word cannot hold what the two patterns mask.
_MAYBE_SENSITIVE = re.compile(r"session=|token", re.IGNORECASE)
MASK = "***"
_TOKEN_NAMES = frozenset({"accesstoken", "xacsdingtalkaccesstoken"})


def _is_token_name(key: Any) -> bool:
    """``accessToken``, ``access_token``, ``x-acs-dingtalk-access-token`` in any case."""
    if isinstance(key, bytes):
        key = key.decode("latin-1")
    return isinstance(key, str) and re.sub(r"[-_\s]", "", key).lower() in _TOKEN_NAMES


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    if _MAYBE_SENSITIVE.search(text) is None:
        return text
    text = _SESSION.sub(rf"\1{MASK}", text)
    return _TOKEN_HEADER.sub(rf"\1{MASK}", text)


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 4]

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, self.secrets)
        if isinstance(value, dict):
            return {
                k: MASK if _is_token_name(k) and v else self._clean(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self._clean(v) for v in value)
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        # Redact the rendered message, not its parts: in ``log.info('"accessToken": "%s"',
        # token)`` neither the template nor the argument alone shows what the token is.
        try:
            rendered = record.getMessage()
        except Exception:  # a bad template: logging reports it later; still mask the parts
            record.msg = self._clean(str(record.msg))
            if record.args:
                record.args = (
                    tuple(self._clean(a) for a in record.args)
                    if isinstance(record.args, tuple)
                    else self._clean(record.args)
                )
        else:
            record.msg, record.args = self._clean(rendered), None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD:
                setattr(record, key, self._clean(value))
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self._clean(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


# The robot a line is about, in a deployment of several: set while a robot starts, so its
# tasks carry it (a task keeps the context it was made in), and its connector's thread too.
ROBOT: ContextVar[str | None] = ContextVar("dta_robot", default=None)


@contextmanager
def robot_context(code: str) -> Iterator[None]:
    """Lines logged here, and by tasks and threads started here, name ``code``."""
    token = ROBOT.set(code)
    try:
        yield
    finally:
        ROBOT.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        robot = ROBOT.get()
        if robot is not None:
            entry["robot"] = robot
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: str, secrets: Iterable[str]) -> None:
    """Route dta's and the SDK's logs to stderr, redacted, as JSON or plain text."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter(list(secrets)))
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("dta").setLevel(level)
    logging.getLogger("dta.sdk").setLevel("WARNING")
    # The SDK logs through its own handlers; send them through ours (redacted) instead.
    for name in ("dingtalk_stream", "dingtalk_stream.client", "dingtalk_stream.handler"):
        sdk_logger = logging.getLogger(name)
        sdk_logger.handlers.clear()
        sdk_logger.propagate = True


class FailureLog:
    """Logs a failure that may repeat on every frame: the first, then one line per interval.

    Each line carries the total so far and how many failures it stands for, so a disk that
    stays full costs one warning a minute, not one per frame. The first success after a
    failure is logged too, so an operator sees when it cleared.
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.interval_s = interval_s
        self.clock = clock
        self.failures = 0
        self._unlogged = 0
        self._last_logged: float | None = None
        self._failing = False

    def failed(self, exc: BaseException) -> None:
        self.failures += 1
        self._unlogged += 1
        self._failing = True
        now = self.clock()
        if self._last_logged is not None and now - self._last_logged < self.interval_s:
            return
        self.logger.warning(
            self.what,
            extra={
                "error": type(exc).__name__,
                "detail": str(exc)[:200],
                "failures": self.failures,
                "since_last_log": self._unlogged,
            },
        )
        self._last_logged, self._unlogged = now, 0

    def succeeded(self) -> None:
        if self._failing:
            self._failing = False
            self.logger.info(f"{self.what}: recovered", extra={"failures": self.failures})
