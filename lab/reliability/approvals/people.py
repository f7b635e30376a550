"""The people of the approvals run: they press the buttons on approval cards (``Clicker``)
or reply a prompt's text code (``Replier``), as people do: late, twice, or the wrong person
first."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from typing import Any

from lab.fake import FakeDingTalk
from lab.reliability.approvals.parameters import (
    CHOICES,
    EXPIRE_S,
    REDELIVERED,
    STRANGER,
    TWICE,
    WRONG_FIRST,
    request_of,
)
from lab.reliability.approvals.reads import silenced_by_pause
from lab.reliability.daemon import DaemonProcess, until

_PROMPT_CODE = re.compile(r"同意请回复「(@我 )?确认 ([0-9A-F]{4})」")


class Clicker:
    """Presses buttons on approval cards as people do: late, twice, or the wrong person.

    An asker decides once per request and presses every card that asks it with that
    choice: a re-asked act's second card too, as a person who sees it would."""

    def __init__(self, fake: FakeDingTalk, rng: random.Random) -> None:
        self.fake = fake
        self.rng = rng
        self.planned: dict[str, str | None] = {}  # msg -> the asker's intended choice
        self.pressed: set[str] = set()  # the cards (outTrackIds) seen
        self.cards_per_msg: Counter[str] = Counter()
        self.keys: list[str] = []  # every click delivered (the fake's callback keys)
        self.msgs: list[str] = []  # the message each was for
        self.wrong = 0
        self.tasks: list[asyncio.Task[None]] = []

    def _choice(self) -> str | None:
        roll, total = self.rng.random(), 0.0
        for choice, share in CHOICES:
            total += share
            if roll < total:
                return choice
        return None

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for card in list(self.fake.cards):
                msg = card.data.get("msg_id")
                if not msg or card.out_track_id in self.pressed:
                    continue
                self.pressed.add(card.out_track_id)
                self.cards_per_msg[msg] += 1
                if msg not in self.planned:
                    self.planned[msg] = self._choice()
                press = self._press(msg, card.out_track_id, self.planned[msg])
                self.tasks.append(asyncio.create_task(press))
            await asyncio.sleep(0.05)

    def _click(self, msg: str, track: str, by: str, choice: str) -> None:
        # this card (no message id: the fake would take the message's latest card)
        self.keys.append(self.fake.click("", by, choice, out_track_id=track)["msg"])
        self.msgs.append(msg)

    async def _press(self, msg: str, track: str, choice: str | None) -> None:
        asker = str(self.fake.inbound[msg]["senderStaffId"])
        if self.rng.random() < WRONG_FIRST:
            await asyncio.sleep(self.rng.uniform(0.1, 1.0))
            self._click(msg, track, "u-stranger", "approve")
            self.wrong += 1
        if choice is None:
            return
        await asyncio.sleep(self.rng.uniform(0.2, EXPIRE_S * 0.5))
        self._click(msg, track, asker, choice)
        if self.rng.random() < TWICE:
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
            self._click(msg, track, asker, choice)


class Replier(Clicker):
    """Answers the prompts asked in words as people do: with the prompt's code, late,
    twice, delivered again, or first from the wrong person; and again after a pause that
    silenced every reply they had sent (they heard nothing back).

    ``keys`` and ``msgs`` are the reply messages (msgIds) and the requests they are for."""

    def __init__(self, fake: FakeDingTalk, rng: random.Random, paused: bool) -> None:
        super().__init__(fake, rng)
        self.paused = paused  # the paused fault is on: look for silenced replies
        self.daemons: list[DaemonProcess] = []  # set by run(): the store to look in
        self.flowing: asyncio.Event | None = None  # set by run(): cleared while paused
        self.seen = 0  # how far fake.received has been read
        self.asked: set[tuple[str, str]] = set()  # (request, code) prompts answered
        self.prompts = 0  # prompts read (a repeated one too)
        self.stranger_elsewhere: set[str] = set()  # a stranger's code in their own chat
        self.twice = 0
        self.redelivered = 0
        self.silenced: list[str] = []  # replies a pause silenced, seen while running
        self.again: dict[str, str] = {}  # request -> the reply sent again after the resume
        self._n = 0

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            received = self.fake.received
            for message in received[self.seen :]:
                found = _PROMPT_CODE.search(message.text or "")
                msg = self._request_of(message) if found else None
                if found is None or msg is None:
                    continue
                self.prompts += 1
                code = found.group(2)
                if (msg, code) in self.asked:
                    continue
                self.asked.add((msg, code))
                self.cards_per_msg[msg] += 1
                if msg not in self.planned:
                    self.planned[msg] = self._choice()
                answer = self._answer(msg, code, self.planned[msg])
                self.tasks.append(asyncio.create_task(answer))
            self.seen = len(received)
            await asyncio.sleep(0.05)

    def _request_of(self, message: Any) -> str | None:
        """The request a prompt asks for: its id in the subject shown, else its chat's."""
        found = request_of(message.text or "")
        if found is not None:
            return found
        people = [*message.user_ids, *message.at_user_ids]
        for where in (*people, message.conversation_id or ""):
            number = re.fullmatch(r"apv-[ug](\d+)", where)
            if number:
                return f"apv-{number.group(1)}"
        return None

    def _reply(self, msg: str, by: str, choice: str, code: str) -> str:
        asked = self.fake.inbound[msg]
        group = asked["conversationId"] if asked.get("conversationType") == "2" else None
        self._n += 1
        key = f"rpl-{self._n}"
        send: dict[str, Any] = {"msg": key, "from": by}
        send["text"] = f"{'确认' if choice == 'approve' else '拒绝'} {code}"
        if group is not None:  # @我 确认 4F2A: the @ is the robot's, not in the text
            send.update(group=group, at_bot=True)
        elif by == STRANGER:  # one-to-one: the stranger can only send it in their own chat
            self.stranger_elsewhere.add(key)
        self.fake.inject(send)
        self.keys.append(key)
        self.msgs.append(msg)
        return key

    async def _answer(self, msg: str, code: str, choice: str | None) -> None:
        asker = str(self.fake.inbound[msg]["senderStaffId"])
        if self.rng.random() < WRONG_FIRST:
            await asyncio.sleep(self.rng.uniform(0.1, 1.0))
            self._reply(msg, STRANGER, "approve", code)
            self.wrong += 1
        if choice is None:
            return
        await asyncio.sleep(self.rng.uniform(0.2, EXPIRE_S * 0.5))
        mine = [self._reply(msg, asker, choice, code)]
        if self.rng.random() < TWICE:
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
            mine.append(self._reply(msg, asker, choice, code))
            self.twice += 1
        if self.rng.random() < REDELIVERED:
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
            self.fake.redeliver(mine[0])
            self.redelivered += 1
        if self.paused and await self._all_silenced(mine):
            assert self.flowing is not None
            await self.flowing.wait()  # the pause is over: the robot is up unpaused
            await asyncio.sleep(self.rng.uniform(0.2, 1.0))
            self.again[msg] = self._reply(msg, asker, choice, code)

    async def _all_silenced(self, keys: list[str]) -> bool:
        """Whether a pause silenced every one of these replies (read once their runs are
        finished, from the store)."""
        store = self.daemons[0].store()
        try:

            def finished() -> bool:
                runs = (store.events.get_run(key) for key in keys)
                return all(run is not None and run.state.is_finished for run in runs)

            if not await until(finished, 30, 0.25):
                return False
            silenced = [key for key in keys if silenced_by_pause(store, key)]
        finally:
            store.close()
        self.silenced += silenced
        return len(silenced) == len(keys)
