"""What ``dta dev`` sends besides plain words: a file, a picture, a quote, words and a
picture in one message — each as the DingTalk message type a person's client sends.

The bytes come from a path on this machine; the fake DingTalk serves them under a download
code of their own (``lab/fake/files.py``), so the robot downloads what was sent, as it would
from DingTalk. A quote names an earlier msgId (one typed here, or a robot message's
``processQueryKey`` shown by ``/trace``) and goes in DingTalk's quote shape.

    /file PATH                 a file message (msgtype file)
    /picture PATH [words]      a picture (msgtype picture); with words, richText: both in one
    /richtext PATH words       words and a picture in one message (msgtype richText)
    /quote MSGID words         a reply quoting MSGID

The options themselves are ``agent/cli/dev_options.py``'s (the prompt and ``dta dev say``
share them).
"""

from __future__ import annotations

import argparse
import base64
import mimetypes
import shlex
from pathlib import Path
from typing import Any

# Larger than a chat message would carry through DingTalk's client is refused here, so the
# fake is never asked to hold a file the platform would not take (20 MB, its media limit).
MAX_DEV_FILE_BYTES = 20 * 1024 * 1024

# Prompt commands and the ``say`` options they stand for.
PROMPT_COMMANDS = {"/file": "--file", "/picture": "--picture", "/richtext": "--richtext"}


def prompt_argv(line: str) -> list[str] | None:
    """A prompt line's ``say`` arguments when it is a media or quote command, else None
    (``/quote MSGID words`` → ``--quote MSGID words``)."""
    words = shlex.split(line)
    if not words:
        return None
    if words[0] in PROMPT_COMMANDS and len(words) >= 2:
        return [PROMPT_COMMANDS[words[0]], *words[1:]]
    if words[0] == "/quote" and len(words) >= 3:
        return ["--quote", *words[1:]]
    return None


def shape_send(
    send: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """The ``send`` step with its media and quote, and the files the fake must serve for it
    (``{code: {name, type, base64}}``, as a case's ``fixtures.files``). ValueError names
    what is wrong (no such file, too large, two media at once, a file with words)."""
    file, picture, richtext = args.file, args.picture, args.richtext
    if sum(p is not None for p in (file, picture, richtext)) > 1:
        raise ValueError("one of --file, --picture, --richtext per message")
    if args.quote:
        send["quote"] = {"msg": args.quote}
    path = file or picture or richtext
    if path is None:
        return send, {}
    code = f"dev-{send['msg']}"
    files = {code: _served(Path(path), "file" if file else "picture")}
    send["attach"] = [code]
    words = send.get("text", "").strip()
    if file is not None:
        if words:
            raise ValueError("a file goes alone, as in DingTalk: send the words after it")
        send.update(msgtype="file", text=files[code]["name"])
    elif richtext is not None or words:
        if not words:
            raise ValueError("--richtext needs words to go with the picture")
        send["msgtype"] = "richText"
    else:
        send["msgtype"] = "picture"
    if "quote" in send and send["msgtype"] not in ("text", "richText"):
        raise ValueError("DingTalk quotes only in text and richText messages")
    return send, files


def _served(path: Path, kind: str) -> dict[str, str]:
    if not path.is_file():
        raise ValueError(f"no such file: {path}")
    size = path.stat().st_size
    if size > MAX_DEV_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes; DingTalk takes at most 20 MB")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if kind == "picture" and not mime.startswith("image/"):
        raise ValueError(f"{path} is not a picture ({mime}); send it with --file")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return {"name": path.name, "type": mime, "base64": data}


class SentBack:
    """What the robot sent as a picture or a file, saved under the instance folder
    (``received/``) as it arrives at the fake, each once, with the line that says where."""

    def __init__(self, platform: Any, folder: Path) -> None:
        self.platform = platform
        self.folder = folder / "received"
        self._seen = 0

    def new_lines(self) -> list[str]:
        received = self.platform.received
        lines = []
        for message in received[self._seen :]:
            upload = self.platform.media.get(message.media_id) if message.media_id else None
            if upload is not None and upload.data:
                self.folder.mkdir(parents=True, exist_ok=True)
                path = self.folder / f"{len(list(self.folder.iterdir())) + 1:03d}-{upload.name}"
                path.write_bytes(upload.data)
                lines.append(f"  (the robot's {message.msgtype} {upload.name} is saved: {path})")
        self._seen = len(received)
        return lines
