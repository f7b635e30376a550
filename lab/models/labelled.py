"""A model's words as dta sends them by default: with the AI label's line at the end
(``ai_label = "end"``; docs/architecture.md, "The AI label"). The lab's judges compare what
the platform received with this, so a label that went missing fails them too."""

from __future__ import annotations

from agent.config import Settings
from gates.action_case import LABEL_GAP

DEFAULT_LABEL = str(Settings.model_fields["ai_label_text"].default)


def labelled(words: str) -> str:
    """``words`` with the default AI label after them."""
    return f"{words}{LABEL_GAP}{DEFAULT_LABEL}"
