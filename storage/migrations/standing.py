"""Migrations 16-19: standing work — recurring jobs and their runs, answers' feedback,
ask-user forms waiting for their asker — and knowledge snapshotted from DingTalk.

Released once landed: never edit one then; a new migration is appended to this list.
"""

from __future__ import annotations

from storage.migrations.step import Migration

STANDING: list[Migration] = [
    Migration(
        # A job is what a person (or dta.toml) asked to be done on a schedule; each due slot
        # is an event with a derived id (``job:<job_id>:<slot>``), so it is stored, and run,
        # once across restarts and replicas. ``next_due_at`` is the beat's index; a slot the
        # beat skipped (missed while down, too late to catch up) is a row of ``job_runs``
        # with its reason, as is each slot it dispatched (with the facts' digest its run
        # found, compared by the next run for ``nothing_new``).
        "16: recurring jobs and what became of each of their slots",
        """
        CREATE TABLE jobs (
            job_id TEXT PRIMARY KEY,
            owner_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            schedule TEXT NOT NULL,
            instruction TEXT NOT NULL,
            status TEXT NOT NULL,
            reason TEXT,
            source TEXT NOT NULL,
            origin_json TEXT NOT NULL,
            created_by TEXT NOT NULL,
            created_at {real} NOT NULL,
            next_due_at {real},
            revision {integer} NOT NULL DEFAULT 0,
            updated_at {real} NOT NULL
        );
        CREATE INDEX jobs_due ON jobs (status, next_due_at);
        CREATE INDEX jobs_owner ON jobs (owner_id, conversation_id, status);

        CREATE TABLE job_runs (
            job_id TEXT NOT NULL,
            due_at {real} NOT NULL,
            event_id TEXT,
            outcome TEXT NOT NULL,
            reason TEXT,
            digest TEXT,
            at {real} NOT NULL,
            PRIMARY KEY (job_id, due_at)
        );
        """,
    ),
    Migration(
        # A 👍 / 👎 on an answer's card, kept with the run it rates: one per person and
        # answer (a later press by the same person replaces their earlier one).
        "17: feedback on answers",
        """
        CREATE TABLE feedback (
            event_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            run_id TEXT,
            rating TEXT NOT NULL,
            reason TEXT,
            out_track_id TEXT,
            conversation_id TEXT,
            frame_id TEXT NOT NULL,
            at {real} NOT NULL,
            PRIMARY KEY (event_id, user_id)
        );
        CREATE INDEX feedback_at ON feedback (at);
        """,
    ),
    Migration(
        # An ask-user form waiting for its asker, like an approval: only the asker's submit
        # counts, it survives restarts and replicas, and it expires. ``form_json`` is the
        # whole record (``FormRecord``); ``answer_event_id`` the event that carries its end
        # (``form:<id>``, or the asker's text reply), which the resumed run reads it by.
        "18: ask-user forms",
        """
        CREATE TABLE forms (
            form_id TEXT PRIMARY KEY,
            event_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            thread_key TEXT NOT NULL,
            asker_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            form_json TEXT NOT NULL,
            status TEXT NOT NULL,
            out_track_id TEXT,
            values_json TEXT,
            submitted_by TEXT,
            answer_event_id TEXT,
            created_at {real} NOT NULL,
            expires_at {real} NOT NULL,
            decided_at {real}
        );
        CREATE INDEX forms_track ON forms (out_track_id);
        CREATE INDEX forms_thread ON forms (thread_key, status);
        CREATE INDEX forms_due ON forms (status, expires_at);
        CREATE INDEX forms_answer ON forms (answer_event_id);
        """,
    ),
    Migration(
        # Knowledge that lives in DingTalk, snapshotted with provenance: each doc (or AI
        # table) of a source with its title, link, modified time and content hash; its
        # sections in order (a table's records are its sections); each source's last good
        # sync and its problem; a generation every change of a doc's sections or status
        # moves (the index's cue, the same on every replica); and an asker's right to read
        # a doc, as DingTalk said it at a modified time (the permission probe's cache).
        "19: knowledge snapshots from DingTalk, and who may read them",
        """
        CREATE TABLE knowledge_docs (
            source TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            title TEXT NOT NULL,
            url TEXT,
            modified_at {real},
            content_hash TEXT NOT NULL,
            fetched_at {real} NOT NULL,
            changed_at {real} NOT NULL,
            status TEXT NOT NULL,
            reason TEXT,
            PRIMARY KEY (source, doc_id)
        );
        CREATE TABLE knowledge_sections (
            source TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            position {integer} NOT NULL,
            path TEXT NOT NULL,
            text TEXT NOT NULL,
            modified_at {real},
            PRIMARY KEY (source, doc_id, position)
        );
        CREATE TABLE knowledge_sources (
            source TEXT PRIMARY KEY,
            last_ok_at {real},
            last_attempt_at {real} NOT NULL,
            problem TEXT,
            docs {integer} NOT NULL DEFAULT 0
        );
        CREATE TABLE knowledge_generation (
            one {integer} PRIMARY KEY,
            generation {integer} NOT NULL
        );
        INSERT INTO knowledge_generation (one, generation) VALUES (1, 0);
        CREATE TABLE knowledge_reads (
            union_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            modified_at {real},
            allowed {integer} NOT NULL,
            checked_at {real} NOT NULL,
            PRIMARY KEY (union_id, doc_id)
        );
        """,
    ),
]
