"""DingTalk's side: the Stream connection, frames and ingest, callback readers, and the HTTP
client that sends (transport, addressing, OpenAPI, the pool).
"""
