"""The fake DingTalk's memory and rules, with no HTTP and no Stream Mode in it.

Everything a lab case is judged on lives here: what the platform accepted (``received``),
which sessions and tokens it issued, and which faults are armed. Keeping it free of HTTP
means the harness can read the evidence directly, and the routes in ``lab.fake.http`` stay
a thin translation of DingTalk's wire shapes onto these rules.

This is the bottom of the fake: ``lab.fake.http``, ``lab.fake.stream``,
``lab.fake.callbacks`` and ``lab.fake.control`` read and change this state, and
``lab.fake.platform.FakeDingTalk`` puts them together on top of it. Nothing here imports
them, so the package has no import circle.
"""

from __future__ import annotations

import copy
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agent.clock import Clock
from lab.fake.card_state import FakeCard
from lab.fake.faults import Fault, FaultTarget, ParsedFaults, parse_fault_spec
from lab.fake.files import FakeFile
from lab.fake.workspace_state import Workspace, staff_of, union_of

__all__ = [
    "SESSION_TTL_S",
    "TOKEN_TTL_S",
    "Channel",
    "ConversationKind",
    "FakeApp",
    "PlatformState",
    "ReceivedMessage",
    "Session",
    "UploadedMedia",
]

TOKEN_TTL_S = 7200.0
SESSION_TTL_S = 90 * 60.0

Channel = Literal["session_webhook", "openapi_oto", "openapi_group", "card"]
ConversationKind = Literal["dm", "group"]


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
    at_dingtalk_ids: list[str] = field(default_factory=list)  # @ by dingtalkId (atDingtalkIds)
    media_id: str | None = None  # an image or file message: the upload it shows
    # Real (monotonic) arrival time: the lab's virtual clock stands still during a drain,
    # and the spacing of messages on one screen is measured in real seconds.
    mono: float = field(default_factory=time.monotonic)

    @property
    def screen(self) -> str:
        """The chat it shows in: the group, or the one-to-one chat with its user."""
        if self.conversation_type == "group" and self.conversation_id:
            return self.conversation_id
        return f"dm:{','.join(self.user_ids) or self.conversation_id}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class UploadedMedia:
    """One upload to the media API: what a later image or file message may show."""

    media_id: str
    kind: str  # the upload's ``type``: image, file, voice, video
    name: str  # the multipart part's file name
    size: int
    sha256: str
    robot_code: str | None
    data: bytes = b""  # the bytes, for whoever looks at what the robot sent (``dta dev``)


@dataclass
class Session:
    """A registered session webhook: where a reply to one inbound message lands."""

    conversation_id: str
    conversation_type: ConversationKind
    user_id: str | None
    expires_at: float
    robot_code: str | None = None  # the robot whose callback carried it: who speaks through it


@dataclass(frozen=True)
class FakeApp:
    """One robot's app on the platform: its credentials, its robot code and its identity in
    chats. A fake serves one by default and more when a case lists several robots."""

    app_key: str
    app_secret: str
    robot_code: str
    chatbot_user_id: str


class PlatformState:
    """A DingTalk platform's bookkeeping, small enough to reason about and strict enough to
    catch bugs. ``FakeDingTalk`` serves it; a harness reads it."""

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
        *,
        send_latency_s: float = 0.0,
    ) -> None:
        self.clock = clock
        # The default robot's app (what a harness uses when it names no robot); others join
        # with ``add_robot``. Each app's tokens speak for its robot only.
        self.app_key = app_key
        self.app_secret = app_secret
        self.robot_code = robot_code
        self.chatbot_user_id = chatbot_user_id
        self.apps: dict[str, FakeApp] = {
            app_key: FakeApp(app_key, app_secret, robot_code, chatbot_user_id)
        }
        self.corp_id = corp_id
        self.timeout_fault_s = timeout_fault_s
        # How long DingTalk takes to answer a send (real seconds). Loopback answers in well
        # under a millisecond; the real platform, seen from a server, in tens of them.
        self.send_latency_s = send_latency_s
        self.card_latency_s = 0.005  # a card update in flight: a concurrent one is refused
        # applied_then_timeout stalls this long: past the lab client's read timeout (2 s
        # against the runner's 1 s timeout faults), so the caller never hears the answer
        self.workspace_stall_s = timeout_fault_s * 3
        self.users: dict[str, dict[str, Any]] = dict(users or {})
        self.tokens: dict[str, tuple[float, str]] = {}  # token -> (expires_at, app_key)
        self.revoked_until: dict[str, float] = {}  # app_key -> until when it is refused
        self._base_url: str | None = None  # set by whoever serves this state
        self._forget()

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("start() the fake DingTalk first: it has no address yet")
        return self._base_url

    def _forget(self) -> None:
        """Forget one case's state. Issued tokens survive: real tokens are not revoked."""
        self.sessions: dict[str, Session] = {}
        self.inbound: dict[str, dict[str, Any]] = {}
        self.received: list[ReceivedMessage] = []
        # clicks delivered over the stream whose answers are not yet on their cards
        self._clicks: list[tuple[str, Any, str]] = []
        # reactions put on people's messages: {msg, emotion, recalled}
        self.reactions: list[dict[str, Any]] = []
        self._click_seq = 0
        self.faults: list[Fault] = []
        self.faults_seen: list[dict[str, Any]] = []
        self.webhook_expired = False
        self.flow_controlled: set[str] = set()  # batchSend lists these, delivers nothing
        self.invalid_users: set[str] = set()
        self.request_log: list[dict[str, Any]] = []
        # download code -> the file it stands for; download URL token -> (file, fault)
        self.files: dict[str, FakeFile] = {}
        self.download_urls: dict[str, tuple[FakeFile, Fault | None, float]] = {}
        self.downloads = 0  # messageFiles/download calls the platform answered
        self.cards: list[FakeCard] = []  # AI cards, in the order they were created
        # media the robot uploaded (lab/fake/media.py): media_id -> what was uploaded
        self.media: dict[str, UploadedMedia] = {}
        self.workspace = Workspace()  # to-dos and calendar events (lab.fake.workspace)

    # ------------------------------------------------------------------ faults

    def arm_fault(self, spec: dict[str, Any]) -> ParsedFaults:
        """Arm a lab-case fault spec; ``ValueError`` says what is wrong with a bad one.

        Returns the parsed spec, whose stream faults are for the server to apply.
        """
        parsed = parse_fault_spec(spec)
        self.faults.extend(parsed.faults)
        if parsed.webhook_expired is not None:
            self.webhook_expired = parsed.webhook_expired
        if parsed.flow_controlled is not None:
            self.flow_controlled = set(parsed.flow_controlled)
        if parsed.invalid_users is not None:
            self.invalid_users = set(parsed.invalid_users)
        self.faults_seen.append(copy.deepcopy(spec))
        return parsed

    def take_fault(self, target: FaultTarget) -> Fault | None:
        """Consume one use of the oldest armed fault for ``target``, if any."""
        for fault in self.faults:
            if fault.target == target:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    # ------------------------------------------------------------------ apps and tokens

    def add_robot(self, robot_code: str) -> FakeApp:
        """Serve one more robot, with an app of its own (the same one again if it has one)."""
        known = self.app_for_robot(robot_code)
        if known is not None:
            return known
        app = FakeApp(
            f"dta-lab-app-{robot_code}",
            f"dta-lab-secret-{robot_code}",
            robot_code,
            f"$:LWCP_v1:$dta-lab-bot-{robot_code}",
        )
        self.apps[app.app_key] = app
        return app

    def use_robot(self, robot_code: str) -> FakeApp:
        """Make ``robot_code`` (given an app if it has none) the robot a step that names
        no robot goes to (``dta dev`` with several robots: the first)."""
        app = self.add_robot(robot_code)
        self.app_key, self.app_secret = app.app_key, app.app_secret
        self.robot_code, self.chatbot_user_id = app.robot_code, app.chatbot_user_id
        return app

    def app_for_robot(self, robot_code: str | None) -> FakeApp | None:
        """The app of ``robot_code`` (the default robot's for None)."""
        if robot_code is None:
            return self.apps[self.app_key]
        return next((app for app in self.apps.values() if app.robot_code == robot_code), None)

    def app_for_credentials(self, app_key: Any, app_secret: Any) -> FakeApp | None:
        app = self.apps.get(app_key) if isinstance(app_key, str) else None
        return app if app is not None and app_secret == app.app_secret else None

    def revoke(self, robot_code: str | None, for_s: float) -> None:
        """The app's credentials revoked for ``for_s`` seconds (rotated, say): its tokens
        stop working at once and the token endpoint refuses it until then."""
        app = self.app_for_robot(robot_code)
        if app is None:
            raise ValueError(f"no robot {robot_code!r} on this platform")
        for token, (_, key) in list(self.tokens.items()):
            if key == app.app_key:
                del self.tokens[token]
        self.revoked_until[app.app_key] = self.clock.now() + for_s

    def is_revoked(self, app_key: str) -> bool:
        return self.clock.now() < self.revoked_until.get(app_key, 0.0)

    def issue_token(self, app_key: str | None = None) -> str:
        """A new access token for an app (the default one), valid for two hours of the
        platform's clock."""
        token = secrets.token_hex(16)
        self.tokens[token] = (self.clock.now() + TOKEN_TTL_S, app_key or self.app_key)
        return token

    def token_app(self, token: str | None) -> FakeApp | None:
        """The app a token speaks for, while it is valid."""
        held = self.tokens.get(token or "")
        if held is None or self.clock.now() >= held[0]:
            return None
        return self.apps.get(held[1])

    def token_valid(self, token: str | None) -> bool:
        return self.token_app(token) is not None

    # ------------------------------------------------------------------ sessions, inbound

    def register_session(
        self,
        conversation_id: str,
        conversation_type: ConversationKind,
        user_id: str | None,
        expires_at: float,
        robot_code: str | None = None,
    ) -> str:
        """Register a session webhook and return its URL, as a callback would carry it."""
        session_id = secrets.token_hex(16)
        self.sessions[session_id] = Session(
            conversation_id, conversation_type, user_id, expires_at, robot_code or self.robot_code
        )
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
        at_dingtalk_ids: list[str] | None = None,
        media_id: str | None = None,
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
            at_dingtalk_ids=list(at_dingtalk_ids or []),
            media_id=media_id,
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
            "unionid": self.union_id(userid),
        }

    # ------------------------------------------------------------------ workspace

    def union_id(self, user_id: str) -> str:
        """The staff id's unionId (the directory's, or one derived from the staff id)."""
        return union_of(self.users, user_id)

    def staff_id(self, union_id: str) -> str | None:
        """The staff id of a unionId of someone in the directory; None for anyone else."""
        return staff_of(self.users, union_id)

    def seed_todos(self, todos: list[dict[str, Any]]) -> None:
        """``fixtures.todos``: to-dos held from the start, executors given as staff ids;
        the first executor is taken as the creator. An ``id`` is the to-do's id (one the
        fake makes up otherwise); two seeded with one id are refused (``ValueError``)."""
        now_ms = int(self.clock.now() * 1000)
        for item in todos:
            executors = [self.union_id(u) for u in item.get("executors", [])]
            todo = self.workspace.add_todo(
                executors[0] if executors else "",
                str(item["subject"]),
                now_ms,
                executors=executors,
                done=bool(item.get("done", False)),
                due_ms=item.get("due_ms"),
            )
            if item.get("id") is not None:
                if self.workspace.todo(str(item["id"])) is not None:
                    raise ValueError(f"a to-do with the id {item['id']!r} is already held")
                todo.id = str(item["id"])

    def workspace_view(self) -> dict[str, list[dict[str, Any]]]:
        """The to-dos and events held, in staff ids: what ``GET /_lab/workspace`` answers."""
        return self.workspace.view(self.users)
