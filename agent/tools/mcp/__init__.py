"""MCP servers as tool sources (``[[mcp_servers]]`` in dta.toml), over the official SDK."""
