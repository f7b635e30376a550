"""A lab case's steps (``steps``): what is sent, redelivered, faulted, restarted, waited
for, done by an operator, or clicked, in order."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from agent.crashpoints import CrashPoint
from lab.eval.case_base import CaseModel

# The fields of DingTalk's ``repliedMsg`` (../shared/dingtalk-platform.md): a raw quote in a
# case may give these and nothing else.
REPLIED_MSG_KEYS = frozenset({"msgType", "msgId", "senderId", "createdAt", "content"})


class SendSpec(CaseModel):
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


class RestartSpec(CaseModel):
    """``{"restart": {...}}``: ``crash`` arms a crash point instead of restarting now;
    ``config`` holds configuration overrides (any top-level key a case's ``config`` may
    set) that apply from this restart on — merged over the case's ``config`` and every
    earlier restart's, key by key; with ``crash``, from the start after that crash."""

    crash: CrashPoint | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class OperatorSpec(CaseModel):
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


STEP_KINDS = (
    "send",
    "frame",
    "redeliver",
    "fault",
    "restart",
    "wait",
    "operator",
    "click",
    "edit_doc",
    "delete_doc",
)


class EditDocSpec(CaseModel):
    """``{"edit_doc": {"id", "text"}}``: a person rewrites a doc of ``fixtures.docs`` (its
    text replaced, modified at the step's time)."""

    id: str = Field(min_length=1)
    text: str


class ClickSpec(CaseModel):
    """A person presses a button on the card the run of ``msg`` sent (lab-cases.md)."""

    msg: str = Field(min_length=1)
    by: str = Field(min_length=1)
    # approve / deny: an approval card; stop: a streaming reply card; submit (with
    # ``values``): an ask-user form card; up / down (``reason`` with a down): an answer's
    # feedback buttons
    choice: Literal["approve", "deny", "stop", "submit", "up", "down"]
    values: dict[str, Any] | None = None
    reason: str | None = None
    after_frames: int | None = Field(default=None, ge=1)
    # "stop" on the answer's N-th card (1: the first), pressed once a later card of it holds
    # ``after_frames`` frames; unset: the card being streamed ("up" / "down": its last)
    card: int | None = Field(default=None, ge=1)
    # dta extension: the callback's frame id; a later click with the same one is DingTalk
    # delivering that callback again (it got no ack in time), not a new press
    frame_id: str | None = Field(default=None, min_length=1)


class Step(CaseModel):
    at: float | None = Field(default=None, ge=0)
    send: SendSpec | None = None
    frame: Any = None
    redeliver: str | None = None
    fault: dict[str, Any] | None = None
    restart: RestartSpec | None = None  # ``true`` is a plain restart: ``{}``
    wait: float | None = Field(default=None, ge=0)
    operator: OperatorSpec | None = None
    click: ClickSpec | None = None
    edit_doc: EditDocSpec | None = None
    # dta extension: a doc or table of the fixtures is deleted (withdrawn) at this step
    delete_doc: str | None = Field(default=None, min_length=1)

    @field_validator("restart", mode="before")
    @classmethod
    def _plain_restart(cls, value: Any) -> Any:
        # One shape, so a problem in an object is named at its own field
        # (``restart.config``) instead of once per member of a bool-or-object union.
        if value is True:
            return {}
        return None if value is False else value

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
