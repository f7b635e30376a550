"""The pipeline's store calls on their own: how much of the pipeline's time is its store.

``StoreCalls`` is attached to the store of a pipeline run by ``dta lab bench`` and keeps a
deep copy of the arguments of every call the run makes to it and its record families
(events.add_event, work.open_run, the gate's facts, actions.add_intent, the lookups for the
invocation...). ``replay``
makes the same calls in the same order on a fresh store, timed.

The replay is what the pipeline would take if everything but its store calls (parsing,
both gates, the provider, building the models, the transport, the loop) took no time.
Divided into the bare writes' time it is the highest pipeline ratio the store layer itself
allows; the pipeline's time less the replay's is what the rest costs. The figures answer
"is the gap to the bare writes in the store or around it?" in every run, not once in a note.
"""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage import Store
from storage.base import Family

# Store methods a run makes no use of while events flow, or that end the store.
_NOT_RECORDED = frozenset({"close", "probe", "set_autocheckpoint", "writers_held"})


@dataclass
class StoreCalls:
    """The store calls of one pipeline run, recorded while attached."""

    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    _wrapped: list[tuple[object, str]] = field(default_factory=list, init=False, repr=False)

    def attach(self, store: Store) -> None:
        """Record every public method call on ``store`` and its record families from now on,
        named as called (``events.add_event``); instance attributes shadow the classes'
        methods, so ``detach`` restores them by deleting."""
        for prefix, holder in _holders(store):
            for name, _ in inspect.getmembers(type(holder), inspect.isfunction):
                if name.startswith("_") or name in _NOT_RECORDED:
                    continue
                setattr(holder, name, self._recording(prefix + name, getattr(holder, name)))
                self._wrapped.append((holder, name))

    def detach(self) -> None:
        for holder, name in self._wrapped:
            delattr(holder, name)
        self._wrapped = []

    def _recording(self, name: str, bound: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            # A copy as of the call: the pipeline goes on changing some of its models (an
            # attempt gets its outcome after add_intent stored it as started).
            self.calls.append((name, copy.deepcopy(args), copy.deepcopy(kwargs)))
            return bound(*args, **kwargs)

        return call

    def replay(self, path: Path, synchronous: str = "normal") -> float:
        """The recorded calls, in order, on a fresh store at ``path``; seconds taken.

        The store leaves the arguments it is given as it found them (checked in
        tests/test_bench_floor.py), so one recording serves every round."""
        store = Store(path, synchronous)
        try:
            started = time.perf_counter()
            for name, args, kwargs in self.calls:
                _method(store, name)(*args, **kwargs)
            return time.perf_counter() - started
        finally:
            store.close()


def _holders(store: Store) -> list[tuple[str, object]]:
    """The store and each of its record families, with the prefix their calls are named by."""
    families = [(f"{name}.", v) for name, v in vars(store).items() if isinstance(v, Family)]
    return [("", store), *families]


def _method(store: Store, name: str) -> Any:
    """The method a recorded call's name says: ``counts``, ``events.add_event``."""
    holder: Any = store
    for part in name.split("."):
        holder = getattr(holder, part)
    return holder
