"""Repeatable reliability evidence: redelivery storm, crash loop, connection chaos, soak.

Each script starts the real daemon (``dta run``) as a subprocess against an in-process fake
DingTalk on loopback, drives it, and judges it only from what the platform received and
what the store kept. Every module exposes ``async def run(size, workdir) -> dict`` (a
JSON-able report with ``passed``) and ``main()``, so it runs as
``python -m lab.reliability.<name> [--reduced] [--json]``; ``tests/integration/
test_reliability.py`` runs the reduced sizes in CI.
"""
