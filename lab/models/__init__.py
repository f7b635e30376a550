"""The lab's models: the fake OpenAI-compatible model (plain, streamed, paced), the
scripted and constant-answer models, the scripted provider and the fake MCP server."""
