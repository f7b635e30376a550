"""AI cards: a delivery form of a reply (their API, pacing, streaming, recovery)."""
