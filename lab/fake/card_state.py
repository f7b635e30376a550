"""One AI card as the fake DingTalk keeps it: the platform's record a case is judged on.

Pure data, like ``lab.fake.faults``: the routes that change it live in ``lab.fake.cards``.
A card is also a message in the chat (``message``, channel ``card``), whose text is the
card's content as the person sees it at the end, so ``platform.count`` and
``platform.messages`` count and read cards like any other message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["FakeCard"]


class Shown(Protocol):
    """The chat entry a card is (a ``ReceivedMessage``): its text is what a person sees."""

    text: str
    robot_code: str | None  # the robot that sent it


BLANK_ABOVE = 3000  # a card block longer than this renders blank on DingTalk's clients


@dataclass
class FakeCard:
    seq: int
    out_track_id: str
    template_id: str
    space: str  # openSpaceId: dtv1.card//IM_GROUP.<cid> or dtv1.card//IM_ROBOT.<staff id>
    conversation_type: str  # dm | group
    conversation_id: str | None
    user_ids: list[str]
    at_user_ids: list[str]
    created_at: float
    message: Shown
    data: dict[str, str] = field(default_factory=dict)  # cardParamMap, as last set
    key: str | None = None  # the variable frames were streamed into
    frames: list[dict[str, Any]] = field(default_factory=list)
    content: str = ""
    flow_status: str = "1"
    finalized: bool = False  # a final frame or a finished/failed state: no longer spinning
    busy: bool = False  # an update is being applied: a concurrent one is refused
    # what a click's answer showed one person only (userPrivateData), by staff id
    private: dict[str, dict[str, str]] = field(default_factory=dict)

    # Set once any text over BLANK_ABOVE code points was shown: DingTalk renders such a
    # block blank while its API answers success (a case proves it never happens).
    blank: bool = False

    def show(self, content: str) -> None:
        self.content = content
        self.message.text = content
        self.blank = self.blank or len(content) > BLANK_ABOVE

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "out_track_id": self.out_track_id,
            "template_id": self.template_id,
            "conversation_type": self.conversation_type,
            "conversation_id": self.conversation_id,
            "user_ids": list(self.user_ids),
            "at_user_ids": list(self.at_user_ids),
            "frames": [frame["content"] for frame in self.frames],
            "content": self.content,
            "flow_status": self.flow_status,
            "finished": self.flow_status == "3",
            "finalized": self.finalized,
            "blank": self.blank,
            "data": dict(self.data),
            "private": {user: dict(view) for user, view in self.private.items()},
        }
