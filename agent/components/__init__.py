"""Every component built from ``Settings`` in one place: each default is written once, in
``agent/config/fields.py``, and this package turns settings into the parts' own small configs.

    runtime = Runtime(settings)                # uses the builders below
    provider = build_provider(settings)

- ``policies``: the gates' policies and the small configs of the transport, invocations,
  media, models, the connector and the store's schema;
- ``providers``: the provider (chosen here and nowhere else) and the ``rules`` fallback;
- ``acts``: acts, approvals and tool sources, and the tools a run offers;
- ``own_events``: the one routing table of the runtime's own events, and its proactive work;
- ``build``: the store, the broker, the cards, the pipeline's parts, the pipeline, the
  heartbeat.
"""

from agent.components.acts import (
    ActParts,
    build_acts,
    build_clicks,
    build_mcp,
    tool_box,
    writes_enabled,
)
from agent.components.build import (
    PipelineParts,
    build_broker,
    build_cards,
    build_heartbeat,
    build_parts,
    build_pipeline,
    open_store,
)
from agent.components.own_events import build_own_events, build_proactive
from agent.components.policies import (
    action_policy,
    connector_config,
    invocation_limits,
    media_limits,
    model_limits,
    response_policy,
    schedule_policy,
    store_schema,
    transport_config,
)
from agent.components.providers import (
    build_provider,
    rules_provider,
)

__all__ = [
    "ActParts",
    "PipelineParts",
    "action_policy",
    "build_acts",
    "build_broker",
    "build_cards",
    "build_clicks",
    "build_heartbeat",
    "build_mcp",
    "build_own_events",
    "build_parts",
    "build_pipeline",
    "build_proactive",
    "build_provider",
    "connector_config",
    "invocation_limits",
    "media_limits",
    "model_limits",
    "open_store",
    "response_policy",
    "rules_provider",
    "schedule_policy",
    "store_schema",
    "tool_box",
    "transport_config",
    "writes_enabled",
]
