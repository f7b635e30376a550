"""Tools a model may call, and the one interface the host offers them through.

``builtin`` declares the DingTalk workspace tools (their JSON schemas, read or write, the
risk a write carries); ``ToolRunner`` is what a provider is handed to call them: the host
decides what is enabled, runs reads at once and sends every write through the action gate.
A provider never calls DingTalk itself.
"""

from skills.tools.builtin import BUILTIN, READ_TOOLS, openai_tools
from skills.tools.runner import ToolRunner

__all__ = ["BUILTIN", "READ_TOOLS", "ToolRunner", "openai_tools"]
