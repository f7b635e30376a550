"""What a test needs from the machine, and what happens when it is missing.

Locally a missing piece (PostgreSQL, Chromium, the shared cases, ``/dev/full``, ``chattr``)
skips the test with the reason. Under CI (``CI=true``) it fails it: a green CI run must
have run everything README's test command promises.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Skip for ``reason`` here; under CI, fail with it."""
    if in_ci():
        pytest.fail(f"{reason} (CI must run this test)")
    pytest.skip(reason)
