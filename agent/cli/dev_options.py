"""The options of one message sent to ``dta dev`` — from its prompt or with ``dta dev say`` —
declared once for both (``lab/dev/media.py`` turns the media ones into DingTalk's shapes)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_message_options(parser: argparse.ArgumentParser) -> None:
    """Who sends, where, the words, and what goes with them."""
    parser.add_argument("--group", help="openConversationId of a group (absent: a DM)")
    parser.add_argument("--at-bot", action="store_true", help="@ the robot (groups)")
    parser.add_argument("--from", dest="user", default="dev-user", help="sender staff id")
    parser.add_argument("--file", type=Path, help="send this file (msgtype file)")
    parser.add_argument(
        "--picture", type=Path, help="send this picture; with words, as one richText message"
    )
    parser.add_argument(
        "--richtext", type=Path, metavar="PICTURE", help="words and this picture in one message"
    )
    parser.add_argument("--quote", metavar="MSGID", help="reply quoting this earlier message")
    parser.add_argument("text", nargs="*", help="the words (optional with --file, --picture)")
