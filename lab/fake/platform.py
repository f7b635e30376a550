"""The fake DingTalk's memory and rules, with no HTTP in it.

Everything a lab case is judged on lives here: what the platform accepted (``received``),
which sessions and tokens it issued, and which faults are armed. Keeping it free of HTTP
means the harness can read the evidence directly, and the routes in ``lab.fake.http`` stay
a thin translation of DingTalk's wire shapes onto these rules.
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

from agent.clock import Clock

TOKEN_TTL_S = 7200.0
SESSION_TTL_S = 90 * 60.0

Channel = Literal["session_webhook", "openapi_oto", "openapi_group"]
ConversationKind = Literal["dm", "group"]
FaultTarget = Literal["webhook", "openapi", "token", "identity"]

# Which inner keys each fault target understands; anything else is a typo in a case file.
_FAULT_KEYS: dict[str, frozenset[str]] = {
    "webhook": frozenset({"status", "times", "delivered", "timeout", "retry_after", "expired"}),
    "openapi": frozenset({"status", "times", "delivered", "timeout", "retry_after"}),
    "token": frozenset({"status", "times", "timeout", "retry_after"}),
    "identity": frozenset({"status", "times", "timeout"}),
}


@dataclass
class ReceivedMessage:
    """One message the platform accepted: what a user would see in their chat."""

    seq: int
    channel: Channel
    conversation_id: str | None  # group openConversationId, or the DM id for webhooks
    conversation_type: ConversationKind
    user_ids: list[str]  # one-to-one targets
    msgtype: str
    text: str
    title: str | None
    at_user_ids: list[str]
    at_all: bool
    time: float
    process_query_key: str | None
    robot_code: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Session:
    """A registered session webhook: where a reply to one inbound message lands."""

    conversation_id: str
    conversation_type: ConversationKind
    user_id: str | None
    expires_at: float


@dataclass
class Fault:
    """An armed failure for the next ``remaining`` requests that would otherwise succeed."""

    target: FaultTarget
    remaining: int = 1
    status: int | None = None
    timeout: bool = False
    delivered: bool = False
    retry_after: float | None = None

    @property
    def answer_status(self) -> int:
        """A timeout that is finally answered looks like a gateway giving up."""
        return self.status if self.status is not None else 504


@dataclass
class ParsedFaults:
    faults: list[Fault] = field(default_factory=list)
    webhook_expired: bool | None = None
    disconnect: bool = False


def _bool(target: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"fault {target}.{key} must be true or false, got {value!r}")
    return value


def _parse_target(target: str, inner: Any, parsed: ParsedFaults) -> None:
    if not isinstance(inner, dict):
        raise ValueError(f"fault {target!r} must be an object, got {inner!r}")
    unknown = sorted(set(inner) - _FAULT_KEYS[target])
    if unknown:
        raise ValueError(f"fault {target!r}: unknown key(s) {', '.join(map(repr, unknown))}")
    if "expired" in inner:
        others = sorted(set(inner) - {"expired"})
        if others:
            raise ValueError(f"fault webhook.expired cannot be combined with {others}")
        parsed.webhook_expired = _bool(target, "expired", inner["expired"])
        return
    status = inner.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599
    ):
        raise ValueError(f"fault {target}.status must be an HTTP error status, got {status!r}")
    times = inner.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"fault {target}.times must be a positive integer, got {times!r}")
    retry_after = inner.get("retry_after")
    if retry_after is not None and (
        isinstance(retry_after, bool) or not isinstance(retry_after, int | float) or retry_after < 0
    ):
        raise ValueError(f"fault {target}.retry_after must be seconds >= 0, got {retry_after!r}")
    timeout = _bool(target, "timeout", inner.get("timeout", False))
    delivered = _bool(target, "delivered", inner.get("delivered", False))
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
        )
    )


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
        elif target in _FAULT_KEYS:
            _parse_target(target, inner, parsed)
        else:
            known = ", ".join([*_FAULT_KEYS, "disconnect"])
            raise ValueError(f"unknown fault {target!r} (known: {known})")
    return parsed


class FakeDingTalk:
    """A DingTalk platform small enough to reason about and strict enough to catch bugs."""

    def __init__(
        self,
        clock: Clock,
        app_key: str = "dta-lab-app",
        app_secret: str = "dta-lab-secret",
        robot_code: str = "dta-lab-robot",
        chatbot_user_id: str = "$:LWCP_v1:$dta-lab-bot",
        corp_id: str = "dinglabcorp",
        timeout_fault_s: float = 2.0,
        users: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.clock = clock
        self.app_key = app_key
        self.app_secret = app_secret
        self.robot_code = robot_code
        self.chatbot_user_id = chatbot_user_id
        self.corp_id = corp_id
        self.timeout_fault_s = timeout_fault_s
        self.users: dict[str, dict[str, Any]] = dict(users or {})
        self.tokens: dict[str, float] = {}  # token -> expires_at
        self._base_url: str | None = None
        self._server: Any = None  # the aiohttp runner, owned by lab.fake.http
        self.reset()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the platform over HTTP; returns the base URL (the real port, if 0 was asked)."""
        from lab.fake.http import serve  # http.py depends on this module, not the reverse

        if self._server is not None:
            raise RuntimeError("the fake DingTalk is already running")
        self._server, self._base_url = await serve(self, host, port)
        return self._base_url

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.cleanup()

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("start() the fake DingTalk first: it has no address yet")
        return self._base_url

    def reset(self) -> None:
        """Forget one case's state. Issued tokens survive: real tokens are not revoked."""
        self.sessions: dict[str, Session] = {}
        self.inbound: dict[str, dict[str, Any]] = {}
        self.received: list[ReceivedMessage] = []
        self.faults: list[Fault] = []
        self.faults_seen: list[dict[str, Any]] = []
        self.webhook_expired = False
        self.request_log: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ faults

    def arm_fault(self, spec: dict[str, Any]) -> None:
        """Arm a lab-case fault spec; ``ValueError`` says what is wrong with a bad one."""
        parsed = parse_fault_spec(spec)
        self.faults.extend(parsed.faults)
        if parsed.webhook_expired is not None:
            self.webhook_expired = parsed.webhook_expired
        self.faults_seen.append(copy.deepcopy(spec))

    def take_fault(self, target: FaultTarget) -> Fault | None:
        """Consume one use of the oldest armed fault for ``target``, if any."""
        for fault in self.faults:
            if fault.target == target:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    # ------------------------------------------------------------------ tokens

    def credentials_match(self, app_key: Any, app_secret: Any) -> bool:
        return app_key == self.app_key and app_secret == self.app_secret

    def issue_token(self) -> str:
        """A new access token, valid for two hours of the platform's clock."""
        token = secrets.token_hex(16)
        self.tokens[token] = self.clock.now() + TOKEN_TTL_S
        return token

    def token_valid(self, token: str | None) -> bool:
        expires_at = self.tokens.get(token or "")
        return expires_at is not None and self.clock.now() < expires_at

    # ------------------------------------------------------------------ sessions, inbound

    def register_session(
        self,
        conversation_id: str,
        conversation_type: ConversationKind,
        user_id: str | None,
        expires_at: float,
    ) -> str:
        """Register a session webhook and return its URL, as a callback would carry it."""
        session_id = secrets.token_hex(16)
        self.sessions[session_id] = Session(conversation_id, conversation_type, user_id, expires_at)
        return f"{self.base_url}/robot/sendBySession?session={session_id}"

    def live_session(self, session_id: str | None) -> Session | None:
        """The session if it still works: unknown, expired or fault-expired ones do not."""
        session = self.sessions.get(session_id or "")
        if session is None or self.webhook_expired or session.expires_at <= self.clock.now():
            return None
        return session

    def record_inbound(self, data: dict[str, Any]) -> None:
        self.inbound[str(data.get("msgId"))] = data

    # ------------------------------------------------------------------ outbound

    def accept(
        self,
        *,
        channel: Channel,
        conversation_id: str | None,
        conversation_type: ConversationKind,
        user_ids: list[str],
        msgtype: str,
        text: str,
        title: str | None = None,
        at_user_ids: list[str] | None = None,
        at_all: bool = False,
        process_query_key: str | None = None,
        robot_code: str | None = None,
    ) -> ReceivedMessage:
        """Keep a message as delivered: from here on a user can see it."""
        message = ReceivedMessage(
            seq=len(self.received) + 1,
            channel=channel,
            conversation_id=conversation_id,
            conversation_type=conversation_type,
            user_ids=list(user_ids),
            msgtype=msgtype,
            text=text,
            title=title,
            at_user_ids=list(at_user_ids or []),
            at_all=at_all,
            time=self.clock.now(),
            process_query_key=process_query_key,
            robot_code=robot_code,
        )
        self.received.append(message)
        return message

    def by_query_key(self, key: str | None, channel: Channel) -> ReceivedMessage | None:
        for message in self.received:
            if key and message.process_query_key == key and message.channel == channel:
                return message
        return None

    def log_request(self, method: str, path: str, status: int) -> None:
        """Record a request by path only: queries and headers may carry secrets."""
        self.request_log.append(
            {"method": method, "path": path, "status": status, "time": self.clock.now()}
        )

    def user_detail(self, userid: str) -> dict[str, Any] | None:
        """The staff directory entry in the shape of ``/topapi/v2/user/get``'s result."""
        entry = self.users.get(userid)
        if entry is None:
            return None
        dept_names = [str(name) for name in entry.get("dept_names", entry.get("depts", []))]
        dept_ids = entry.get("dept_id_list") or [
            100 + index for index in range(1, len(dept_names) + 1)
        ]
        return {
            "userid": userid,
            "name": entry.get("name", userid),
            "title": entry.get("title", ""),
            "dept_id_list": list(dept_ids),
            "dept_names": dept_names,
        }
