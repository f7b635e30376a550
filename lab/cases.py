"""The lab case format (``dta.lab.case/1``): load and validate case files.

A case file that does not fit the format is rejected before anything runs, with the file,
the field and the reason (``CaseError``), so a typo in an expectation can never turn into
a silently passing case.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.config import ConfigError, Settings
from agent.contracts import (
    ActionKind,
    AgentDefinition,
    Channel,
    Contract,
    MemoryCandidate,
    ReceiptStatus,
    TaskCheckpoint,
    Verdict,
)
from agent.crashpoints import CrashPoint
from lab.card_cases import CardExpect
from lab.fake import parse_fault_spec
from lab.fake.files import parse_files
from lab.fake.platform import Channel as PlatformChannel
from lab.fake.workspace_state import UNION_PREFIX
from lab.fake_model import FakeModel

SCHEMA = "dta.lab.case/1"


class CaseError(Exception):
    """A case file that cannot be run; the message names file, field and reason."""


class CasePathError(CaseError):
    """A path given to the lab that holds no case. A mistyped or absent folder must never read
    as "nothing to check": the run would pass without the cases it was asked to run."""


class Category(StrEnum):
    HOST_LOADING = "host-loading"
    CONVERSATION_CONTRACT = "conversation-contract"
    AUTHORITY_AND_EGRESS = "authority-and-egress"
    TASK_LIFECYCLE = "task-lifecycle"
    MEMORY_AND_STORAGE = "memory-and-storage"
    WORKSPACE_AND_ARTIFACTS = "workspace-and-artifacts"
    PLATFORM_RELIABILITY = "platform-reliability"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# The fields of DingTalk's ``repliedMsg`` (../shared/dingtalk-platform.md): a raw quote in a
# case may give these and nothing else.
REPLIED_MSG_KEYS = frozenset({"msgType", "msgId", "senderId", "createdAt", "content"})
# Text a case matches on: an empty fragment is in every text, so it would check nothing.
Fragment = Annotated[str, Field(min_length=1)]


class SendSpec(_Model):
    msg: str
    from_: str = Field(alias="from")
    nick: str | None = None
    group: str | None = None
    text: str | None = None
    at_bot: bool = False
    at: list[str] = Field(default_factory=list)
    msgtype: str | None = None
    quote: dict[str, Any] | None = None
    age: float | None = None
    raw: dict[str, Any] | None = None
    # dta extension: download codes of the message's files (fixtures.files declares them)
    attach: list[str] = Field(default_factory=list)
    # which robot receives it (config.robots' robot_code; default: the first)
    robot: str | None = None

    @field_validator("quote")
    @classmethod
    def _quote_keys(cls, quote: dict[str, Any] | None) -> dict[str, Any] | None:
        """One of the quote's three forms, with no key a reader would mistake for another:
        ``{"msg", "shape"?}``, ``{"platform_message"}``, or a raw ``repliedMsg``."""
        if quote is None:
            return None
        if "platform_message" in quote:
            allowed, form = {"platform_message"}, "a quote of a robot message"
        elif "msg" in quote:
            allowed, form = {"msg", "shape"}, "a quote of an earlier message"
        else:
            allowed, form = REPLIED_MSG_KEYS, "a raw repliedMsg"
        unknown = sorted(set(quote) - allowed)
        if unknown:
            raise ValueError(
                f"unknown key(s) {unknown} in {form}; it takes {', '.join(sorted(allowed))}"
            )
        if quote.get("shape", "text") not in ("text", "content"):
            raise ValueError(f"shape must be 'text' or 'content', got {quote['shape']!r}")
        return quote

    def short_keys(self) -> dict[str, Any]:
        """The step as the fake platform's callback builder takes it."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) | {
            "msg": self.msg,
            "from": self.from_,
        }


class RestartSpec(_Model):
    crash: CrashPoint | None = None


class OperatorSpec(_Model):
    """dta extension: ``dta send`` — one message from the operator to a user or a group."""

    msg: str | None = None  # the event id, so expectations can name it
    user: str | None = None
    group: str | None = None
    text: str = Field(min_length=1)
    robot: str | None = None  # which robot sends it (default: the first)

    @model_validator(mode="after")
    def _one_recipient(self) -> OperatorSpec:
        if (self.user is None) == (self.group is None):
            raise ValueError("an operator send names exactly one of user, group")
        return self


STEP_KINDS = ("send", "frame", "redeliver", "fault", "restart", "wait", "operator", "click")


class ClickSpec(_Model):
    """A person presses a button on the card the run of ``msg`` sent (lab-cases.md)."""

    msg: str = Field(min_length=1)
    by: str = Field(min_length=1)
    choice: Literal["approve", "deny", "stop"]
    after_frames: int | None = Field(default=None, ge=1)


class Step(_Model):
    at: float | None = Field(default=None, ge=0)
    send: SendSpec | None = None
    frame: Any = None
    redeliver: str | None = None
    fault: dict[str, Any] | None = None
    restart: RestartSpec | bool | None = None
    wait: float | None = Field(default=None, ge=0)
    operator: OperatorSpec | None = None
    click: ClickSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _remember_frame(cls, data: Any) -> Any:
        # `frame` may legitimately be null or any JSON value; note that it was given.
        if isinstance(data, dict) and "frame" in data:
            data = dict(data)
            data["frame"] = {"__frame__": data["frame"]}
        return data

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Step:
        kinds = [
            name
            for name in STEP_KINDS
            if getattr(self, name) is not None and getattr(self, name) is not False
        ]
        if len(kinds) != 1:
            raise ValueError(
                f"a step needs exactly one of {', '.join(STEP_KINDS)}; got {kinds or 'none'}"
            )
        return self

    @property
    def kind(self) -> str:
        for name in STEP_KINDS:
            value = getattr(self, name)
            if value is not None and value is not False:
                return name
        raise AssertionError("validated step without a kind")

    @property
    def frame_value(self) -> Any:
        return self.frame["__frame__"]


def _given(model: BaseModel, empty_checks: frozenset[str]) -> set[str]:
    """The keys a case actually gave a value to check: ``null`` and ``[]`` check nothing,
    except where an empty list is itself the expectation (``at_users: []`` is "nobody")."""
    return {
        name
        for name in model.model_fields_set
        if (value := getattr(model, name)) is not None and (value != [] or name in empty_checks)
    }


class _Check(_Model):
    """An expectation object: one that gives no key would match anything, so it is refused."""

    EMPTY_CHECKS: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _checks_something(self) -> _Check:
        if not _given(self, self.EMPTY_CHECKS):
            names = ", ".join(type(self).model_fields)
            raise ValueError(f"an empty object matches anything; give at least one of {names}")
        return self


class MessageExpect(_Check):
    EMPTY_CHECKS = frozenset({"at_users"})

    conversation: str | None = None
    user: str | None = None
    contains: list[Fragment] = Field(default_factory=list)
    not_contains: list[Fragment] = Field(default_factory=list)
    matches: Fragment | None = None
    # exactly these users are @-ed, in any order; [] means nobody is
    at_users: list[str] | None = None
    # dta extension: the channel the platform took the message on
    channel: PlatformChannel | None = None
    # what kind of message the person sees (lab-cases.md, "Several robots, media out")
    msgtype: Literal["text", "markdown", "image", "file", "link", "actionCard", "card"] | None = (
        None
    )
    # which robot sent it (its robot_code), in a case with several robots
    robot: str | None = None


class RunExpect(_Check):
    """``expect.runs[msgId]``: the provider whose answer was delivered, and whether the
    run degraded (``model_budget``, ``model_unavailable``, or false)."""

    provider: str | None = None
    degraded: Literal["model_budget", "model_unavailable", False] | None = None
    # dta extension: the state the run ended in (answered, failed, silent, waiting, …)
    state: str | None = None


class ModelRequestExpect(_Check):
    """``expect.model_requests[i]``: the i-th request the fake model received, matched over
    everything in it (system prompt, history, knowledge, the repair round's words)."""

    contains: list[Fragment] = Field(default_factory=list)
    not_contains: list[Fragment] = Field(default_factory=list)


class CallsExpect(_Check):
    """``platform.calls``: exact counts of the HTTP requests the fake answered, by kind
    (``lab.fake.calls.CALL_KINDS``); a kind left out is not checked."""

    total: int | None = Field(default=None, ge=0)
    token: int | None = Field(default=None, ge=0)
    directory: int | None = Field(default=None, ge=0)
    send: int | None = Field(default=None, ge=0)
    card: int | None = Field(default=None, ge=0)
    download: int | None = Field(default=None, ge=0)
    media_upload: int | None = Field(default=None, ge=0)
    reaction: int | None = Field(default=None, ge=0)
    todo: int | None = Field(default=None, ge=0)
    calendar: int | None = Field(default=None, ge=0)
    readback: int | None = Field(default=None, ge=0)
    recall: int | None = Field(default=None, ge=0)


class TodoExpect(_Check):
    """``platform.todos[i]``: the i-th to-do the fake workspace holds (creation order)."""

    EMPTY_CHECKS = frozenset({"executors"})

    contains: list[Fragment] = Field(default_factory=list)  # in the subject
    executors: list[str] | None = None  # exactly these staff ids, in any order
    done: bool | None = None


class EventExpect(_Check):
    """``platform.events[i]``: the i-th calendar event the fake workspace holds."""

    EMPTY_CHECKS = frozenset({"attendees"})

    contains: list[Fragment] = Field(default_factory=list)  # in the summary
    attendees: list[str] | None = None  # exactly these staff ids, in any order


class ReactionExpect(_Check):
    """A reaction put on a person's message (in order): whose message, and whether it was
    taken off again."""

    msg: str | None = None
    recalled: bool | None = None


class PlatformExpect(_Check):
    EMPTY_CHECKS = frozenset({"cards", "reactions"})

    count: int | None = Field(default=None, ge=0)
    messages: list[MessageExpect] = Field(default_factory=list)
    # dta extension: message-file download calls the platform answered
    downloads: int | None = Field(default=None, ge=0)
    # dta extension: every AI card the platform created, in order ([] means none)
    cards: list[CardExpect] | None = None
    # every request the fake answered, by kind (``../shared/lab-cases.md``)
    calls: CallsExpect | None = None
    # the smallest real gap between two messages the fake received for one conversation
    min_gap_s: float | None = Field(default=None, gt=0)
    # what the fake workspace holds, in creation order (lab-cases.md, "Workspace tools")
    todos: list[TodoExpect] = Field(default_factory=list)
    events: list[EventExpect] = Field(default_factory=list)
    todos_count: int | None = Field(default=None, ge=0)
    events_count: int | None = Field(default=None, ge=0)
    # reactions put on people's messages, in order ([] means none)
    reactions: list[ReactionExpect] | None = None

    @model_validator(mode="after")
    def _messages_not_empty(self) -> PlatformExpect:
        for name, count in (("messages", "count"), ("todos", "todos_count")):
            if name in self.model_fields_set and not getattr(self, name):
                raise ValueError(f"'{name}': [] checks nothing; say '{count}': 0 for none")
        if "events" in self.model_fields_set and not self.events:
            raise ValueError("'events': [] checks nothing; say 'events_count': 0 for none")
        return self


class DecisionExpect(_Check):
    verdict: Verdict | None = None
    reason: str | None = None


class ReceiptExpect(_Check):
    EMPTY_CHECKS = frozenset({"channels"})

    msg: str | None = None
    kind: ActionKind | None = None
    status: ReceiptStatus | None = None
    reason: str | None = None
    # dta extensions, from the receipt's evidence: the channel that carried it last
    # (`none` when nothing was sent) and every channel tried, in order
    channel: Channel | None = None
    channels: list[Channel] | None = None


class RefusalExpect(_Check):
    msg: str | None = None
    reason: str


def _subset_of(contract: type[Contract]) -> AfterValidator:
    """Check a subset-match record against the contract the store's records are dumped from.

    A misspelt key would never equal anything in a record that lacks it, and a misspelt
    value (``"status": "complete"``) never equals a real one: either turns a case into one
    that cannot pass for the reason it claims, so both are refused before anything runs.
    """
    fields = {name: field for name, field in contract.model_fields.items() if name != "schema_"}

    def check(record: dict[str, Any]) -> dict[str, Any]:
        if not record:
            raise ValueError("an empty object matches any record; name a field to check")
        for key, value in record.items():
            field = fields.get(key)
            if field is None:
                raise ValueError(
                    f"{key!r} is not a field of {contract.__name__}; one of {', '.join(fields)}"
                )
            try:
                TypeAdapter(field.annotation).validate_json(json.dumps(value), strict=True)
            except ValidationError as exc:
                message = exc.errors()[0]["msg"]
                raise ValueError(f"{key!r}: {message}") from None
        return record

    return AfterValidator(check)


TaskSubset = Annotated[dict[str, Any], _subset_of(TaskCheckpoint)]
MemorySubset = Annotated[dict[str, Any], _subset_of(MemoryCandidate)]


class ApprovalExpect(_Check):
    """One approval, in creation order (subset match)."""

    msg: str | None = None
    tool: str | None = None
    status: Literal["pending", "approved", "denied", "expired", "void"] | None = None
    by: str | None = None


class Expect(_Model):
    """What the evidence must show. Every key given is checked; a case with none is refused.

    An explicit empty list of records (``receipts``, ``refusals``, ``tasks``,
    ``memory_candidates``) means "none at all"; empty ``decisions`` or ``processed`` would
    check nothing and are refused.
    """

    EMPTY_CHECKS: ClassVar[frozenset[str]] = frozenset(
        {"receipts", "refusals", "tasks", "memory_candidates"}
    )

    platform: PlatformExpect | None = None
    decisions: dict[str, DecisionExpect] | None = None
    receipts: list[ReceiptExpect] | None = None
    refusals: list[RefusalExpect] | None = None
    quarantined: int | None = Field(default=None, ge=0)
    processed: list[str] | None = None
    # dta extension: redelivered frames recognised as duplicates (acked, counted, not run)
    duplicates: int | None = Field(default=None, ge=0)
    # subset matches on the store's records
    tasks: list[TaskSubset] | None = None
    memory_candidates: list[MemorySubset] | None = None
    # what the fake model was asked (lab-cases.md, "What the model saw and said")
    model_requests: list[ModelRequestExpect] | None = None
    runs: dict[str, RunExpect] | None = None
    model_requests_count: int | None = Field(default=None, ge=0)
    # the approvals of acts, in creation order (lab-cases.md, "Workspace tools")
    approvals: list[ApprovalExpect] | None = None
    approvals_count: int | None = Field(default=None, ge=0)

    @field_validator("decisions", "processed")
    @classmethod
    def _names_a_message(cls, value: dict[str, Any] | list[str] | None) -> Any:
        if value is not None and not value:
            raise ValueError("an empty one checks nothing; name the msgIds")
        return value

    @model_validator(mode="after")
    def _checks_something(self) -> Expect:
        if not _given(self, self.EMPTY_CHECKS):
            raise ValueError(
                "a case must check something; give at least one of "
                + ", ".join(type(self).model_fields)
            )
        return self


class UserFixture(_Model):
    """One person in the fake's staff directory (``fixtures.users``)."""

    name: str = Field(min_length=1)
    title: str | None = None
    dept_names: list[str] = Field(default_factory=list)
    dept_id_list: list[int] = Field(default_factory=list)
    union_id: str | None = None


class TodoFixture(_Model):
    """A to-do the fake workspace holds from the start (``fixtures.todos``)."""

    subject: str = Field(min_length=1)
    executors: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)  # staff ids
    done: bool = False
    due: AwareDatetime | None = None

    def seed(self) -> dict[str, Any]:
        """As ``PlatformState.seed_todos`` takes it (the due time in milliseconds)."""
        due_ms = None if self.due is None else int(self.due.timestamp() * 1000)
        return {"subject": self.subject, "executors": self.executors, "done": self.done} | (
            {} if due_ms is None else {"due_ms": due_ms}
        )


def directory(users: dict[str, UserFixture]) -> dict[str, dict[str, Any]]:
    """``fixtures.users`` as the fake's staff directory takes it."""
    return {uid: user.model_dump(exclude_none=True) for uid, user in users.items()}


class Fixtures(_Model):
    knowledge: dict[str, str] = Field(default_factory=dict)
    agent: AgentDefinition | None = None
    # dta extensions: extra skill files (path under a skills folder -> text), and raw
    # provider output for chosen messages (msgId -> list of raw requests)
    skills: dict[str, str] = Field(default_factory=dict)
    provider_script: dict[str, list[Any]] = Field(default_factory=dict)
    # the fake platform's staff directory: user id -> {name, title, dept_names}
    users: dict[str, UserFixture] = Field(default_factory=dict)
    # the fake model's scripted answers (lab.fake_model): msgId -> list of entries
    model_script: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    # files the fake platform serves: download code -> {name, type, content | base64, size}
    files: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # to-dos the fake workspace holds at the start (executors are staff ids)
    todos: list[TodoFixture] = Field(default_factory=list)

    @field_validator("users")
    @classmethod
    def _one_person_per_union_id(cls, users: dict[str, UserFixture]) -> dict[str, UserFixture]:
        # The workspace APIs name people by unionId only: two people sharing one could not
        # be told apart when the fake turns it back into a staff id.
        seen: dict[str, str] = {}
        for user_id, user in users.items():
            union = user.union_id or UNION_PREFIX + user_id
            if union in seen:
                raise ValueError(f"{user_id} and {seen[union]} share the union_id {union!r}")
            seen[union] = user_id
        return users


class Case(_Model):
    schema_: Literal["dta.lab.case/1"] = Field(alias="schema")
    id: str = Field(min_length=1)
    category: Category
    title: str
    tags: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    fixtures: Fixtures = Field(default_factory=Fixtures)
    steps: list[Step] = Field(min_length=1)
    expect: Expect
    path: str = Field(default="", exclude=True)


def _problem(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"] if p != "__frame__") or "(case)"
        parts.append(f"field '{where}': {err['msg']}")
    return "; ".join(parts)


def load_case(path: Path) -> Case:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CaseError(f"{path}: not valid JSON: {exc}") from None
    except OSError as exc:
        raise CaseError(f"{path}: cannot read: {exc}") from None
    if not isinstance(document, dict):
        raise CaseError(f"{path}: a case must be a JSON object")
    try:
        case = Case.model_validate(document)
    except ValidationError as exc:
        raise CaseError(f"{path}: {_problem(exc)}") from None
    try:
        # the lab supplies the model endpoint and the app; the case supplies everything else
        Settings(
            openai_base_url="http://127.0.0.1/v1",
            openai_model="lab",
            client_id="lab",
            client_secret="lab",
        ).with_overrides(case.config)
    except ConfigError as exc:
        raise CaseError(f"{path}: field 'config': {exc}") from None
    try:
        FakeModel(case.fixtures.model_script)  # checks the script's entries
    except ValueError as exc:
        raise CaseError(f"{path}: field 'fixtures.model_script': {exc}") from None
    try:
        parse_files(case.fixtures.files)
    except ValueError as exc:
        raise CaseError(f"{path}: field 'fixtures.files': {exc}") from None
    for index, step in enumerate(case.steps):
        if step.fault is not None:
            try:
                parse_fault_spec(step.fault)
            except ValueError as exc:
                raise CaseError(f"{path}: field 'steps.{index}.fault': {exc}") from None
    case.path = str(path)
    return case


def discover_all(paths: list[Path]) -> tuple[list[Case], list[CaseError]]:
    """Every valid case under the given files and folders (recursively, ``*.json``, in a
    stable order), and an error for each path or file that cannot run.

    One invalid file must not hide the verdicts of all the others: the caller runs the
    valid cases and still fails the run (exit 2) for the rest.
    """
    files: list[Path] = []
    errors: list[CaseError] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.rglob("*.json"))
            if not found:
                errors.append(CasePathError(f"{path}: no *.json case files in this folder"))
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            errors.append(CasePathError(f"{path}: no such file or folder"))
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for file in files:
        try:
            case = load_case(file)
        except CaseError as exc:
            errors.append(exc)
            continue
        if case.id in seen:
            errors.append(
                CaseError(f"{case.path}: field 'id': \"{case.id}\" is also used by {seen[case.id]}")
            )
            continue
        seen[case.id] = case.path
        cases.append(case)
    return cases, errors


def discover(paths: list[Path]) -> list[Case]:
    """Like ``discover_all``, but the first problem raises (for callers that need all)."""
    cases, errors = discover_all(paths)
    if errors:
        raise errors[0]
    return cases
