"""The long-running process: serve, health, metrics, recorder, hand-off."""
