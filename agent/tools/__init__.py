"""The tools a model may call, in one home.

- ``base``: what a built-in workspace tool is (``ReadTool``, ``WriteTool``: its spec and its
  call) and the workspace client's protocols;
- ``workspace/``: one module per built-in DingTalk tool (its ``TOOL``), found by ``builtin``;
- ``mcp/``: MCP servers as tool sources, over the official SDK;
- ``catalog``: any tool by name, built-in or MCP; ``schema``: the arguments' check;
- ``registry``: the enabled tools (``ToolBox``) and the view one run offers its model
  (``RunTools``): reads run at once, every write made an act.

The contracts (``ToolSpec``, ``ToolCall``, ``ToolResult``) are ``agent/contracts/tool_specs.py``.
Nothing is imported here, so the configuration can read the built-in specs alone.
"""
