"""Every key of ``dta.toml`` with its default, written once, and what it is for.

``Settings`` (``agent/config/settings.py``) is these keys with the checks that span several
of them, the values derived from them and the robots of a deployment of several; import it
from ``agent.config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent.config.parts import JobEntry, KnowledgeSource, McpServer, ModelPrice
from agent.contracts import AgentDefinition
from agent.contracts.filetypes import MAX_UPLOAD_BYTES

DINGTALK_API = "https://api.dingtalk.com"


class SettingsFields(BaseModel):
    """The keys alone; their checks are ``Settings``'s."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # behaviour
    provider: Literal["rules", "openai", "command"] = "rules"
    paused: bool = False
    allow_users: list[str] = Field(default_factory=list)
    deny_users: list[str] = Field(default_factory=list)
    allow_conversations: list[str] = Field(default_factory=list)
    max_event_age_s: float = Field(default=900, gt=0)
    # "*": every type DingTalk sends; list types to exclude the rest (unsupported_msgtype)
    supported_msgtypes: list[str] = Field(default_factory=lambda: ["*"])
    write_budget_per_conversation_per_minute: int = Field(default=20, ge=0)
    write_budget_per_day: int = Field(default=10000, ge=0)
    max_reply_chars: int = Field(default=3800, ge=100, le=6000)
    max_reply_chunks: int = Field(default=4, ge=1)
    # The visible label China's rule for AI-generated content asks of a model's words
    # (../shared/dingtalk-knowledge-and-forms-apis.md §6): at the end of the reply, at its
    # start, as a footer line of a card ("card"; a text reply gets it at the end), or "off"
    # for an operator who labels elsewhere. The host's own words are not labelled.
    ai_label: Literal["end", "start", "card", "off"] = "end"
    ai_label_text: str = Field(default="内容由 AI 生成", min_length=1, max_length=40)
    # pictures and files a reply may carry (each its own message after the text), and the
    # largest one: DingTalk's media upload takes up to 20 MB
    max_attachments_per_reply: int = Field(default=4, ge=0, le=20)
    max_attachment_bytes: int = Field(default=MAX_UPLOAD_BYTES, ge=1024, le=MAX_UPLOAD_BYTES)
    agent: AgentDefinition = Field(default_factory=AgentDefinition)

    # the enriched invocation (agent/run/invocation.py)
    burst_window_s: float = Field(default=120, ge=0)
    # a provider sees the person's last context_turns messages to the robot in this
    # conversation within context_window_s, with the robot's delivered replies (0: none)
    context_window_s: float = Field(default=1800, ge=0)
    context_turns: int = Field(default=6, ge=0, le=50)
    max_text_chars: int = Field(default=4000, ge=100)
    max_quote_chars: int = Field(default=1000, ge=50)
    max_burst_messages: int = Field(default=10, ge=0)
    identity_lookup: bool = True
    identity_ttl_s: float = Field(default=86400, ge=0)
    identity_timeout_s: float = Field(default=2.0, gt=0)
    # the old-style OpenAPI host (user details); defaults to oapi.dingtalk.com for the
    # real platform and to openapi_base_url for anything else (the bundled fake)
    oapi_base_url: str | None = None
    # write response-gate.json, enriched-invocation.json and CONTEXT.md per run here
    run_dir: Path | None = None
    knowledge_dir: Path | None = None
    # a run is given at most knowledge_items matching sections (and memories), each cut to
    # knowledge_item_chars (agent/run/grounding.py)
    knowledge_items: int = Field(default=3, ge=0, le=20)
    knowledge_item_chars: int = Field(default=1500, ge=100)
    skill_paths: list[Path] = Field(default_factory=list)

    # media (agent/run/media.py): fetched only for runs the response gate engaged
    media_dir: Path = Path(".dta/media")  # one folder per run, beside the store by default
    max_download_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    download_timeout_s: float = Field(default=30, gt=0)
    media_keep_days: float = Field(default=7, gt=0)  # `dta store prune` removes older media
    max_file_chars: int = Field(default=8000, ge=100)  # of a text file shown to a model
    # the text of a PDF, Word or Excel file given to the provider (agent/run/documents.py):
    # at most this many characters of each file (what is left out is said), read within
    # this many seconds, off the event loop
    document_text_chars: int = Field(default=20_000, ge=200, le=500_000)
    document_read_timeout_s: float = Field(default=10, gt=0, le=120)

    # the robot and its app
    client_id: str | None = None
    client_secret: SecretStr | None = None
    robot_code: str | None = None
    openapi_base_url: str = DINGTALK_API
    # Webhooks within this many seconds of expiry are treated as expired.
    webhook_expiry_margin_s: float = Field(default=30, ge=0)
    # Session webhooks are contacted only on these origins (scheme://host[:port]); a frame
    # naming any other URL is answered by OpenAPI instead, with the reason on the receipt.
    webhook_origins: list[str] = Field(default_factory=lambda: ["https://oapi.dingtalk.com"])

    # outbound HTTP
    connect_timeout_s: float = Field(default=5, gt=0)
    read_timeout_s: float = Field(default=10, gt=0)
    send_retries: int = Field(default=3, ge=0, le=10)
    max_retry_after_s: float = Field(default=30, ge=0)
    # How long a send waits for an access token DingTalk will not give (credentials revoked
    # or rotated, the token endpoint down): nothing was sent, so it is tried again with
    # back-off for this long before the send is failed as provably not sent.
    token_wait_s: float = Field(default=60, ge=0)
    http_proxy: str | None = None  # e.g. http://proxy:3128 for the OpenAPI and webhooks
    # Requests in flight to DingTalk at once (and kept-alive connections). 8 at a 100 ms
    # answer time is 80 requests/s, more than the ~20 QPS per API a standard app gets;
    # more only help a platform that answers slowly, and each costs CPU on every request
    # (httpcore's pool checks every connection against every other).
    http_max_connections: int = Field(default=8, ge=1, le=100)

    # runtime
    store_path: Path = Path(".dta/dta.db")
    # PostgreSQL instead of the SQLite file, for several replicas of one robot
    # (postgresql://user@host/db); each robot's records live in their own schema,
    # ``dta_<robot code>`` unless ``store_schema`` names one.
    store_url: str | None = None
    store_schema: str | None = None
    store_synchronous: Literal["normal", "full"] = "normal"
    # How long one statement waits for another process's write lock before the store
    # counts as unavailable (the run then waits and is driven again; nothing is dropped).
    store_busy_timeout_s: float = Field(default=10, gt=0)
    # Runs at their provider (the model, a command agent) at once; the rest of every run
    # in memory goes on meanwhile, so its "稍等" still comes ack_after_s after arrival.
    max_concurrent_runs: int = Field(default=16, ge=1)
    shutdown_grace_s: float = Field(default=10, ge=0)
    # The store is the queue: at most this many runs wait in memory; the rest stay durable
    # in the store and are picked up by the recovery loop as capacity frees.
    max_queued_runs: int = Field(default=1000, ge=1)
    # A run is owned under a lease renewed while it works; the recovery loop takes over
    # only runs whose lease expired (an owner that stopped renewing).
    run_lease_s: float = Field(default=60, gt=0)
    # How often the recovery loop looks for stored events without a finished run.
    recovery_interval_s: float = Field(default=5, gt=0)
    # Readiness: the store's write probe gives up after this long (never the busy timeout).
    store_probe_timeout_s: float = Field(default=0.5, gt=0)
    # Frames up to this size are read; larger ones are quarantined (and acked when their
    # id can be read) instead of dropping the connection.
    max_frame_bytes: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)

    # the Stream Mode connection (see agent/dingtalk/connector.py)
    stream_ping_interval_s: float = Field(default=10, gt=0)
    stream_ping_timeout_s: float = Field(default=10, gt=0)
    open_connection_timeout_s: float = Field(default=10, gt=0)
    reconnect_backoff_base_s: float = Field(default=0.5, gt=0)
    reconnect_backoff_max_s: float = Field(default=30, gt=0)

    # operations
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=8765, ge=0, le=65535)  # 0: no health server
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"

    # How a reply is delivered: a text message, a markdown message, or an AI card that fills
    # in as the model writes (agent/cards/broker.py). Acks and the host's own short messages stay
    # text. Card mode needs the OpenAPI credentials and a published card template whose
    # streaming variable is ``card_content_key``.
    reply_mode: Literal["text", "markdown", "card"] = "text"
    card_template_id: str | None = None
    card_content_key: str = Field(default="content", min_length=1)
    # Frames of one card go at least this far apart (a frame carries the full text so far,
    # so skipping ahead loses nothing).
    card_frame_interval_ms: int = Field(default=500, ge=0)
    # Card calls per second for the whole app, shared through the store by every replica;
    # DingTalk throttles at about 20 per second per API on standard plans.
    card_frames_per_second: float = Field(default=10, gt=0, le=100)
    # A card with no progress for this long is finalized with what was streamed and a note
    # that the answer was cut off.
    card_stall_s: float = Field(default=45, gt=0)
    # DingTalk renders a card block of more than about 3,000 Chinese characters blank while
    # its API answers success: a longer answer goes on as the next card (``<key>#2``, …).
    card_block_chars: int = Field(default=2500, ge=100, le=3000)
    # An answer's card carries 👍 / 👎 buttons (the card variable ``feedback`` = "on"; the
    # template's buttons have action ids feedback_up / feedback_down): each press is kept
    # with the run it rates (agent/acts/feedback.py). Text and markdown replies carry no
    # buttons, so they get no feedback.
    feedback_buttons: bool = True

    # Proactive work (agent/proactive/heartbeat.py): every beat looks for due follow-ups, reminders
    # and expiries. Off unless ``heartbeat_interval_s`` is set; reminders need it.
    heartbeat_interval_s: float | None = Field(default=None, ge=1)
    # A task waiting for an answer gets a follow-up after this long without one (off when
    # unset), at most ``max_follow_ups`` times; the next one would expire it instead.
    follow_up_after_s: float | None = Field(default=None, ge=1)
    max_follow_ups: int = Field(default=1, ge=0, le=10)
    # A task (not a reminder) still open this long after it began expires (off when unset).
    task_expiry_s: float | None = Field(default=None, ge=1)
    # "22:00-08:00" (in ``timezone``): follow-ups due then wait for the end; reminders,
    # whose time the person chose, do not.
    quiet_hours: str | None = None
    timezone: str = "Asia/Shanghai"  # how reminder times are read and said
    max_reminder_days: float = Field(default=30, gt=0)
    # Recurring jobs (agent/proactive/jobs.py; they need the heartbeat): those declared here
    # (``[[jobs]]``), and how late a slot missed while the robot was down may still run
    # (once: only the latest missed slot; older ones are skipped with a reason).
    jobs: list[JobEntry] = Field(default_factory=list)
    job_catch_up_s: float = Field(default=3600, ge=0)

    # Knowledge that lives in DingTalk (agent/knowledge/): docs, knowledge bases and AI
    # tables, snapshotted every ``knowledge_sync_s`` (with jitter) by ``knowledge_reader``
    # (a unionId; a source may name its own), served beside ``knowledge_dir``; an asker's
    # right to read a doc is asked of DingTalk and kept ``knowledge_permission_ttl_s``.
    knowledge_sources: list[KnowledgeSource] = Field(default_factory=list)
    knowledge_reader: str | None = None
    knowledge_sync_s: float = Field(default=3600, ge=60)
    knowledge_permission_ttl_s: float = Field(default=300, ge=0)

    # read OpenAPI sends back from DingTalk: receipts say "verified", not just "accepted"
    verify_by_readback: bool = False
    # a message not answered this long after it arrived gets an ack ("seen, working on it")
    ack_after_s: float = Field(default=3.0, gt=0)
    # messages to one conversation start at least this far apart (DingTalk may show closer
    # ones out of order); other conversations never wait on it; 0 = no spacing
    send_gap_s: float = Field(default=1.0, ge=0, le=10)

    # openai provider: any OpenAI-compatible /chat/completions endpoint
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key: SecretStr | None = None
    openai_timeout_s: float = Field(default=60, gt=0)
    openai_max_retries: int = Field(default=2, ge=0, le=10)
    openai_response_format: bool = True  # {"type": "json_object"}; some servers reject it
    openai_vision: bool = False  # the model reads images: pictures go as image parts

    # What a model may cost (0 = no limit), checked before each call (a call that crosses a
    # limit is still delivered); over one, or with the model down, runs fall back to the
    # rules provider and say so. Prices per 1,000 tokens, by model name.
    model_tokens_per_person_per_day: int = Field(default=0, ge=0)
    model_tokens_per_conversation_per_day: int = Field(default=0, ge=0)
    model_tokens_per_month: int = Field(default=0, ge=0)
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)

    # workspace tools a model may call (agent/tools/workspace/); the openai provider only.
    # Reads run at once; writes are acts through the action gate (agent/acts/).
    tools: list[str] = Field(default_factory=list)
    max_tool_steps: int = Field(default=4, ge=1, le=20)  # rounds of tool calls per answer
    # The working signal when an answer takes longer than ack_after_s: a short text (as
    # ever), DingTalk's emotion reaction on the person's message (recalled when the run
    # ends), or nothing.
    ack_style: Literal["text", "reaction", "none"] = "text"
    ack_reaction: str = Field(default="🤔思考中", min_length=1, max_length=20)
    # MCP servers as tool sources (agent/tools/mcp/); their tools join ``tools`` by name
    mcp_servers: list[McpServer] = Field(default_factory=list)
    max_acts_per_run: int = Field(default=3, ge=1, le=20)
    act_budget_per_conversation_per_day: int = Field(default=20, ge=1)
    act_budget_per_day: int = Field(default=200, ge=1)
    # An act that touches others waits for its asker's approval this long, then expires.
    approval_timeout_s: float = Field(default=3600, gt=0)
    # A new request for an act the same person made in this conversation this recently
    # (same tool, object and people) is that act, however it is worded: it is read back,
    # never made twice (agent/acts/identity.py).
    act_repeat_window_s: float = Field(default=1800, ge=0)
    # How long DingTalk may take to show a write it timed out on: a read-back that finds
    # nothing sooner is tried again before the act is called not done.
    act_settle_s: float = Field(default=60, ge=0)
    # The approval card (agent/acts/approval_card.py for its contract); without one the
    # asker approves with a text code (「确认 4F2A」).
    approval_card_template_id: str | None = None
    # Ask-user forms (agent/acts/forms.py): the form card's template (agent/acts/form_card.py
    # for its contract; without one a form is a numbered question answered in words), and
    # how long a form waits for its asker before it expires.
    form_card_template_id: str | None = None
    form_timeout_s: float = Field(default=3600, gt=0)

    # command provider: an external agent run in a prepared run directory
    command: list[str] = Field(default_factory=list)  # argv, never a shell line
    command_timeout_s: float = Field(default=60, gt=0)
    command_runs_root: Path = Path(".dta/runs")
    command_env: list[str] = Field(default_factory=list)  # extra env names to pass on
    command_keep_runs: bool = False

    # Several robots in one deployment (``[[robots]]``): each table is one robot's own keys,
    # the rest come from the top level, which then holds defaults only and is no robot
    # itself (agent/config/robots.py). Empty: the top level is the one robot.
    robots: list[dict[str, Any]] = Field(default_factory=list, repr=False)  # holds secrets
