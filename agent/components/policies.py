"""The small configs each part takes, from ``Settings``: the gates' policies, the transport, the
limits of invocations, media and models, the connector, the store's schema."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from agent.config import ConfigError, Settings
from agent.contracts.quiet_hours import parse_quiet_hours
from agent.dingtalk.connector import ConnectorConfig
from agent.dingtalk.openapi import TransportConfig
from agent.proactive.schedule import SchedulePolicy
from agent.run.documents import DocumentLimits
from agent.run.invocation import InvocationLimits
from agent.run.media import MediaLimits
from agent.run.metering import ModelLimits
from gates.action import ActionPolicy
from gates.attachments import AttachmentLimits
from gates.response import ResponsePolicy
from storage.backends.postgres import schema_for


def response_policy(settings: Settings) -> ResponsePolicy:
    return ResponsePolicy(
        paused=settings.paused,
        allow_users=frozenset(settings.allow_users),
        deny_users=frozenset(settings.deny_users),
        allow_conversations=frozenset(settings.allow_conversations),
        max_event_age_s=settings.max_event_age_s,
        supported_msgtypes=frozenset(settings.supported_msgtypes),
        robot_code=settings.robot_code,
    )


def action_policy(settings: Settings) -> ActionPolicy:
    return ActionPolicy(
        robot_code=settings.robot_code,
        write_budget_per_conversation_per_minute=settings.write_budget_per_conversation_per_minute,
        write_budget_per_day=settings.write_budget_per_day,
        max_reply_chars=settings.max_reply_chars,
        max_reply_chunks=settings.max_reply_chunks,
        has_openapi_credentials=settings.has_openapi_credentials,
        webhook_expiry_margin_s=settings.webhook_expiry_margin_s,
        secrets=tuple(settings.secret_values),
        reminders=settings.heartbeat_interval_s is not None,
        max_reminder_days=settings.max_reminder_days,
        timezone=settings.timezone,
        follow_ups=settings.heartbeat_interval_s is not None
        and settings.follow_up_after_s is not None,
        attachments=AttachmentLimits(
            settings.max_attachments_per_reply, settings.max_attachment_bytes
        ),
        tools=frozenset(settings.tools),
        max_acts_per_run=settings.max_acts_per_run,
        act_budget_per_conversation_per_day=settings.act_budget_per_conversation_per_day,
        act_budget_per_day=settings.act_budget_per_day,
        ai_label=settings.ai_label,
        ai_label_text=settings.ai_label_text,
    )


def schedule_policy(settings: Settings) -> SchedulePolicy:
    quiet = parse_quiet_hours(settings.quiet_hours) if settings.quiet_hours else None
    return SchedulePolicy(
        interval_s=settings.heartbeat_interval_s,
        follow_up_after_s=settings.follow_up_after_s,
        max_follow_ups=settings.max_follow_ups,
        task_expiry_s=settings.task_expiry_s,
        quiet_hours=quiet,
        timezone=ZoneInfo(settings.timezone),
        max_reminder_days=settings.max_reminder_days,
    )


def transport_config(settings: Settings) -> TransportConfig:
    secret = settings.client_secret.get_secret_value() if settings.client_secret else None
    return TransportConfig(
        openapi_base_url=settings.openapi_base_url,
        client_id=settings.client_id,
        client_secret=secret,
        robot_code=settings.robot_code,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
        send_retries=settings.send_retries,
        max_retry_after_s=settings.max_retry_after_s,
        token_wait_s=settings.token_wait_s,
        webhook_expiry_margin_s=settings.webhook_expiry_margin_s,
        webhook_origins=tuple(settings.webhook_origins),
        max_connections=settings.http_max_connections,
        proxy=settings.http_proxy,
        directory_base_url=settings.directory_base_url if settings.identity_lookup else None,
        directory_timeout_s=settings.identity_timeout_s,
        oapi_base_url=settings.directory_base_url,
    )


def invocation_limits(settings: Settings) -> InvocationLimits:
    return InvocationLimits(
        max_text_chars=settings.max_text_chars,
        max_quote_chars=settings.max_quote_chars,
        burst_window_s=settings.burst_window_s,
        max_burst_messages=settings.max_burst_messages,
        identity_ttl_s=settings.identity_ttl_s,
        context_window_s=settings.context_window_s,
        context_turns=settings.context_turns,
        timezone=settings.timezone,
        ai_label=settings.ai_label_text if settings.ai_label != "off" else None,
    )


def media_limits(settings: Settings) -> MediaLimits:
    return MediaLimits(
        media_dir=settings.media_dir,
        max_download_bytes=settings.max_download_bytes,
        download_timeout_s=settings.download_timeout_s,
    )


def document_limits(settings: Settings) -> DocumentLimits:
    return DocumentLimits(
        text_chars=settings.document_text_chars,
        timeout_s=settings.document_read_timeout_s,
    )


def model_limits(settings: Settings) -> ModelLimits:
    return ModelLimits(
        per_person_per_day=settings.model_tokens_per_person_per_day,
        per_conversation_per_day=settings.model_tokens_per_conversation_per_day,
        per_month=settings.model_tokens_per_month,
        prices={name: (p.input, p.output) for name, p in settings.model_prices.items()},
        timezone=settings.timezone,
    )


def connector_config(settings: Settings) -> ConnectorConfig:
    if not (settings.client_id and settings.client_secret):
        raise ConfigError(
            "client_id / client_secret: required to connect (set DINGTALK_CLIENT_ID and"
            " DINGTALK_CLIENT_SECRET, or client_id/client_secret in dta.toml)"
        )
    return ConnectorConfig(
        endpoint=settings.openapi_base_url,
        client_id=settings.client_id,
        client_secret=settings.client_secret.get_secret_value(),
        store_path=settings.store_target,
        store_schema=store_schema(settings),
        store_synchronous=settings.store_synchronous,
        store_busy_timeout_s=settings.store_busy_timeout_s,
        ping_interval_s=settings.stream_ping_interval_s,
        ping_timeout_s=settings.stream_ping_timeout_s,
        open_timeout_s=settings.open_connection_timeout_s,
        backoff_base_s=settings.reconnect_backoff_base_s,
        backoff_max_s=settings.reconnect_backoff_max_s,
        max_frame_bytes=settings.max_frame_bytes,
    )


def store_schema(settings: Settings) -> str | None:
    """The PostgreSQL schema of this robot's records (None for SQLite)."""
    if not settings.store_url:
        return None
    return settings.store_schema or schema_for(settings.robot_code)
