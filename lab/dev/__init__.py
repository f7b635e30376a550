"""``dta dev``: your bot against the bundled fake DingTalk (the session, its configuration
and what it shows per message)."""
