"""One event's run: pipeline, acting, endings, broker, invocation, identities, media, memory,
tasks, recovery, dispatcher, gate facts.
"""
