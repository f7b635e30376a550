"""The fake DingTalk's fault-spec language: what a lab case may break, checked before arming.

A case file arms faults with a small JSON language (``{"webhook": {"status": 500}}``,
``{"openapi": {"status": 403, "qps_limit": true}}``, ``{"stream": {"zombie": true}}``); it
is parsed here, whole, before anything is armed, so a typo is named instead of silently
testing nothing. This module is pure data and imports nothing from the fake but the pure
``docs_faults`` (the ``docs`` target), so every other part of it (the platform's rules, its
HTTP face, the ``/_lab`` routes) can depend on it.

The workspace (to-do, calendar; ``lab.fake.workspace``) can also be made as unhelpful as the
real platform may be, where DingTalk's behaviour is undocumented:

- ``{"todo_create": {"error": "applied_late", "after_s": 20}}`` (also ``calendar_create``,
  ``todo_update``): the call answers a timeout (no answer within the client's read timeout;
  with ``"status": 5xx`` that error at once instead) and is applied only ``after_s`` seconds
  later on the fake's clock, so a read-back right after the failure finds nothing and one
  after the settling time finds it. ``times`` defers that many calls, each from its own
  arrival.
- ``{"calendar_create": {"dedupe": false}}`` / ``{"todo_create": {"dedupe": false}}``: a
  *mode*, not a failure — "a platform that keeps every create" (no token dedupe): from now
  on to the end of the case every create makes a new event / to-do, even one repeating an
  ``x-client-token`` / ``sourceId`` (by default the fake answers the first one again).
  ``{"dedupe": true}`` restores the default. A mode is never used up and takes no
  ``times``; given with failure keys (``{"dedupe": false, "error": "applied_then_timeout"}``)
  it also arms that failure, which ``times`` then counts.
- Throttled reads need nothing new: ``{"todo_get": {"error": "throttled", "retry_after": 2,
  "times": 2}}`` (429 ``Throttling`` with ``Retry-After``) or ``{"todo_get": {"qps_limit":
  true}}`` (403 ``Forbidden.AccessDenied.QpsLimitForApi``) refuse the next reads, to-do get
  and by-source alike; ``calendar_get`` and ``calendar_list`` take the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from lab.fake.docs_faults import DocsFault, parse_docs_fault

FaultTarget = Literal[
    "webhook",
    "openapi",
    "token",
    "identity",
    "download",
    "card_create",
    "card_stream",
    "card_update",
    "directory_search",
    "todo_create",
    "todo_get",
    "todo_update",
    "todo_list",
    "calendar_create",
    "calendar_get",
    "calendar_list",
    "calendar_schedule",
    "reaction",
    "reaction_recall",
    "media_upload",
]

# The workspace calls (lab/fake/workspace.py). Those that change something may also be
# ``delivered`` (applied, then answered with the fault); reads cannot.
WORKSPACE_WRITES = ("todo_create", "todo_update", "calendar_create")
WORKSPACE_READS = (
    "directory_search",
    "todo_get",
    "todo_list",
    "calendar_get",
    "calendar_list",
    "calendar_schedule",
)
# The creates that dedupe a repeat by its token (sourceId, x-client-token) unless the
# ``dedupe: false`` mode says the platform keeps every create.
WORKSPACE_DEDUPED = ("todo_create", "calendar_create")
# A workspace problem -> the HTTP status it is answered with; ``applied_then_timeout``
# applies the call, then stalls past the client's read timeout (a 504 if anyone waits);
# ``applied_late`` stalls the same way (or answers its 5xx ``status``) and applies the call
# ``after_s`` seconds later.
WORKSPACE_ERRORS: dict[str, int | None] = {
    "applied_then_timeout": None,
    "applied_late": None,
    "no_permission": 403,
    "throttled": 429,
}
# The errors that apply a write: a read has nothing to apply.
_APPLYING_ERRORS = ("applied_then_timeout", "applied_late")

_WRITE_KEYS = frozenset(
    {"status", "times", "delivered", "timeout", "retry_after", "qps_limit", "error", "after_s"}
)
# Which inner keys each fault target understands; anything else is a typo in a case file.
_FAULT_KEYS: dict[str, frozenset[str]] = {
    "webhook": frozenset({"status", "times", "delivered", "timeout", "retry_after", "expired"}),
    "openapi": frozenset({"status", "times", "delivered", "timeout", "retry_after", "qps_limit"}),
    "token": frozenset({"status", "times", "timeout", "retry_after"}),
    "identity": frozenset({"status", "times", "timeout"}),
    # the robot message-file download: an expired code, a refusal (status), a slow or an
    # oversized file behind the download URL
    "download": frozenset({"status", "times", "timeout", "expired", "oversized"}),
    # the emotion reaction API, put and recall alike (lab/fake/reactions.py)
    "reaction": frozenset({"status", "times", "timeout"}),
    "reaction_recall": frozenset({"status", "times", "timeout"}),  # the recall only
    # the media upload of a reply's picture or file (lab/fake/media.py): refused with an
    # errcode (``status``) or slow past the client's timeout
    "media_upload": frozenset({"status", "times", "timeout"}),
    # the AI card calls (lab/fake/cards.py): createAndDeliver, a streaming frame, the card
    # data update; ``error`` answers as DingTalk does for a card set-up problem
    **dict.fromkeys(
        ("card_create", "card_stream", "card_update"),
        frozenset({"status", "times", "delivered", "timeout", "retry_after", "qps_limit", "error"}),
    ),
    **dict.fromkeys(WORKSPACE_WRITES, _WRITE_KEYS),
    **dict.fromkeys(WORKSPACE_DEDUPED, _WRITE_KEYS | {"dedupe"}),
    **dict.fromkeys(
        WORKSPACE_READS,
        frozenset({"status", "times", "timeout", "retry_after", "qps_limit", "error"}),
    ),
}
# A card set-up problem -> the HTTP status DingTalk answers it with (see lab/fake/cards.py).
CARD_ERRORS = {"unknown_error": 500, "template_unpublished": 400, "no_permission": 403}
_STREAM_KEYS = frozenset({"drop", "zombie", "refuse_s"})
# DingTalk's OpenAPI throttles with HTTP 403 and this code (see dingtalk-platform.md).
QPS_LIMIT_STATUS = 403
QPS_LIMIT_CODE = "Forbidden.AccessDenied.QpsLimitForApi"


@dataclass
class Fault:
    """An armed failure for the next ``remaining`` requests that would otherwise succeed."""

    target: FaultTarget
    remaining: int = 1
    status: int | None = None
    timeout: bool = False
    delivered: bool = False
    retry_after: float | None = None
    qps_limit: bool = False  # answer as DingTalk's throttle: 403 with a QpsLimit code
    expired: bool = False  # download: the code is answered as expired
    oversized: bool = False  # download: the URL serves far more than any sane cap
    error: str | None = None  # a card call: one of CARD_ERRORS; a workspace call: WORKSPACE_ERRORS
    after_s: float | None = None  # applied_late: the write is applied this long after it came
    # Not a failure but a mode of the platform (``lab.fake.workspace`` reads the latest one
    # armed for its target and never uses it up): False = a platform that keeps every create.
    dedupe: bool | None = None

    @property
    def is_mode(self) -> bool:
        return self.dedupe is not None

    @property
    def answer_status(self) -> int:
        """A timeout that is finally answered looks like a gateway giving up."""
        return self.status if self.status is not None else 504


@dataclass
class ParsedFaults:
    faults: list[Fault] = field(default_factory=list)
    webhook_expired: bool | None = None
    disconnect: bool = False
    drop: bool = False  # stream: cut the current connection without a close handshake
    zombie: bool = False  # stream: the current connection goes silent
    refuse_s: float | None = None  # stream: refuse new connections for this many real seconds
    # batchSend's per-recipient answer: these staff ids are flow-controlled or invalid from
    # now on (the send answers 200 with a processQueryKey and lists them; they get nothing)
    flow_controlled: list[str] | None = None
    invalid_users: list[str] | None = None
    docs: DocsFault | None = None  # the doc, wiki and AI-table reads (lab.fake.docs_faults)


def _bool(target: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"fault {target}.{key} must be true or false, got {value!r}")
    return value


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value >= 0


def _parse_target(target: str, inner: Any, parsed: ParsedFaults) -> None:
    if not isinstance(inner, dict):
        raise ValueError(f"fault {target!r} must be an object, got {inner!r}")
    unknown = sorted(set(inner) - _FAULT_KEYS[target])
    if unknown:
        raise ValueError(f"fault {target!r}: unknown key(s) {', '.join(map(repr, unknown))}")
    if target == "download":
        _parse_download(inner, parsed)
        return
    if "expired" in inner:
        others = sorted(set(inner) - {"expired"})
        if others:
            raise ValueError(f"fault webhook.expired cannot be combined with {others}")
        parsed.webhook_expired = _bool(target, "expired", inner["expired"])
        return
    if "dedupe" in inner:
        # A mode of the platform, armed alongside whatever failure the other keys name.
        mode = _bool(target, "dedupe", inner["dedupe"])
        parsed.faults.append(Fault(cast(FaultTarget, target), dedupe=mode))
        inner = {k: v for k, v in inner.items() if k != "dedupe"}
        if not inner:
            return
        if set(inner) == {"times"}:
            raise ValueError(
                f"fault {target}.dedupe is a mode for the rest of the case and takes no times"
                " (times counts a failure armed with it, and none is)"
            )
    status = inner.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599
    ):
        raise ValueError(f"fault {target}.status must be an HTTP error status, got {status!r}")
    times = inner.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"fault {target}.times must be a positive integer, got {times!r}")
    retry_after = inner.get("retry_after")
    if retry_after is not None and not _seconds(retry_after):
        raise ValueError(f"fault {target}.retry_after must be seconds >= 0, got {retry_after!r}")
    timeout = _bool(target, "timeout", inner.get("timeout", False))
    delivered = _bool(target, "delivered", inner.get("delivered", False))
    qps_limit = _bool(target, "qps_limit", inner.get("qps_limit", False))
    error = inner.get("error")
    after_s = inner.get("after_s")
    if error is not None:
        errors = _errors_of(target)
        late = error == "applied_late"
        # applied_late may answer a 5xx instead of its timeout; every other error is alone
        status_ok = status is None or (late and 500 <= status <= 599)
        if error not in errors or not status_ok or timeout or qps_limit or delivered:
            raise ValueError(
                f"fault {target}.error must be one of {', '.join(errors)}, alone"
                " (applied_late: with after_s, and a 5xx status to answer instead of a timeout)"
            )
        if late:
            if not _seconds(after_s):
                raise ValueError(
                    f"fault {target}.applied_late needs after_s: seconds >= 0, got {after_s!r}"
                )
            timeout = status is None
        else:
            status = errors[error]
        if error == "applied_then_timeout":
            delivered = timeout = True
    if after_s is not None and error != "applied_late":
        raise ValueError(f"fault {target}.after_s goes with error applied_late only")
    if qps_limit:
        # A throttle is a refusal: it has one status, and nothing was taken or delayed.
        if status not in (None, QPS_LIMIT_STATUS) or timeout or delivered:
            raise ValueError(
                f"fault {target}.qps_limit answers {QPS_LIMIT_STATUS} at once and keeps nothing;"
                " it cannot be combined with another status, timeout or delivered"
            )
        status = QPS_LIMIT_STATUS
    if status is None and not timeout:
        raise ValueError(f"fault {target!r} needs 'status' or 'timeout': true")
    parsed.faults.append(
        Fault(
            cast(FaultTarget, target),
            times,
            status,
            timeout,
            delivered,
            None if retry_after is None else float(retry_after),
            qps_limit,
            error=error,
            after_s=None if after_s is None else float(after_s),
        )
    )


def _errors_of(target: str) -> dict[str, int | None]:
    """The ``error`` words a target takes: a card's set-up problems, or the workspace's."""
    if target in WORKSPACE_WRITES:
        return WORKSPACE_ERRORS
    if target in WORKSPACE_READS:  # a read has nothing to apply
        return {k: v for k, v in WORKSPACE_ERRORS.items() if k not in _APPLYING_ERRORS}
    return dict(CARD_ERRORS)


def _parse_download(inner: dict[str, Any], parsed: ParsedFaults) -> None:
    """One of ``expired``, ``status``, ``timeout`` (slow) or ``oversized``, with ``times``."""
    kinds = [k for k in ("expired", "status", "timeout", "oversized") if k in inner]
    if len(kinds) != 1:
        raise ValueError(
            "fault 'download' needs exactly one of expired, status, timeout, oversized;"
            f" got {kinds or 'none'}"
        )
    times = inner.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"fault download.times must be a positive integer, got {times!r}")
    status = inner.get("status")
    if "status" in inner and (
        isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599
    ):
        raise ValueError(f"fault download.status must be an HTTP error status, got {status!r}")
    for key in ("expired", "timeout", "oversized"):
        if key in inner and inner[key] is not True:
            raise ValueError(f"fault download.{key} must be true, got {inner[key]!r}")
    parsed.faults.append(
        Fault(
            "download",
            times,
            status,
            timeout="timeout" in inner,
            expired="expired" in inner,
            oversized="oversized" in inner,
        )
    )


def _parse_stream(inner: Any, parsed: ParsedFaults) -> None:
    """``drop`` and ``zombie`` are one-shot actions on the current connection, so only
    ``true`` means anything; together they contradict each other (a cut socket is not silent).
    """
    if not isinstance(inner, dict) or not inner:
        raise ValueError(f"fault 'stream' must be a non-empty object, got {inner!r}")
    unknown = sorted(set(inner) - _STREAM_KEYS)
    if unknown:
        raise ValueError(f"fault 'stream': unknown key(s) {', '.join(map(repr, unknown))}")
    for key in ("drop", "zombie"):
        if key in inner and inner[key] is not True:
            raise ValueError(f"fault stream.{key} must be true, got {inner[key]!r}")
    if "drop" in inner and "zombie" in inner:
        raise ValueError("fault stream.drop and stream.zombie exclude each other")
    refuse = inner.get("refuse_s")
    if "refuse_s" in inner and (not _seconds(refuse) or refuse == 0):
        raise ValueError(f"fault stream.refuse_s must be seconds > 0, got {refuse!r}")
    parsed.drop, parsed.zombie = "drop" in inner, "zombie" in inner
    parsed.refuse_s = None if refuse is None else float(refuse)


def _parse_recipients(inner: Any, parsed: ParsedFaults) -> None:
    """``{"flow_controlled": ["u1"], "invalid": ["u9"]}``: lists of staff ids."""
    if not isinstance(inner, dict) or not inner:
        raise ValueError(f"fault 'recipients' must be a non-empty object, got {inner!r}")
    unknown = sorted(set(inner) - {"flow_controlled", "invalid"})
    if unknown:
        raise ValueError(f"fault 'recipients': unknown key(s) {', '.join(map(repr, unknown))}")
    for key, value in inner.items():
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"fault recipients.{key} must list staff ids, got {value!r}")
    parsed.flow_controlled = inner.get("flow_controlled")
    parsed.invalid_users = inner.get("invalid")


def parse_fault_spec(spec: Any) -> ParsedFaults:
    """Check a whole spec before arming any of it, so a bad spec changes nothing."""
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"a fault spec must be a non-empty object, got {spec!r}")
    parsed = ParsedFaults()
    for target, inner in spec.items():
        if target == "disconnect":
            if inner is not True:
                raise ValueError(f"fault 'disconnect' must be true, got {inner!r}")
            parsed.disconnect = True
        elif target == "stream":
            _parse_stream(inner, parsed)
        elif target == "recipients":
            _parse_recipients(inner, parsed)
        elif target == "docs":
            parsed.docs = parse_docs_fault(inner)
        elif target in _FAULT_KEYS:
            _parse_target(target, inner, parsed)
        else:
            known = ", ".join([*_FAULT_KEYS, "stream", "recipients", "docs", "disconnect"])
            raise ValueError(f"unknown fault {target!r} (known: {known})")
    return parsed
