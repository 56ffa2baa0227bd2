CREATE TABLE session_coordinators (
  target_session_id TEXT PRIMARY KEY,
  coordinator_epoch TEXT NOT NULL UNIQUE,
  connection_id TEXT NOT NULL,
  branch_reported INTEGER NOT NULL DEFAULT 0 CHECK (branch_reported IN (0, 1)),
  attached_at INTEGER NOT NULL,
  reported_at INTEGER
) STRICT;
CREATE TABLE session_terminal_views (
  target_session_id TEXT PRIMARY KEY,
  cleared_run_id TEXT,
  cleared_at INTEGER NOT NULL
) STRICT;
CREATE TABLE workflow_follow_ups (
  follow_up_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  order_number INTEGER NOT NULL CHECK (order_number > 0),
  target_session_id TEXT NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT,
  source_type TEXT NOT NULL,
  prompt_hash BLOB NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued', 'removed', 'cancelled')),
  reason_hash BLOB,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, request_id),
  UNIQUE (run_id, order_number),
  CHECK ((status IN ('removed', 'cancelled')) = (reason_hash IS NOT NULL))
) STRICT;
CREATE TABLE workflow_turns (
  workflow_turn_id TEXT PRIMARY KEY,
  workflow_message_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  target_session_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('started', 'ended')),
  stop_reason TEXT CHECK (stop_reason IS NULL OR stop_reason IN (
    'completed', 'aborted', 'error', 'lost'
  )),
  response_session_entry_id TEXT,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  CHECK (
    (state = 'started' AND stop_reason IS NULL AND ended_at IS NULL)
    OR
    (state = 'ended' AND stop_reason IS NOT NULL AND ended_at IS NOT NULL)
  )
) STRICT;
CREATE INDEX workflow_follow_ups_status_idx
  ON workflow_follow_ups(status);
CREATE INDEX workflow_turns_message_idx
  ON workflow_turns(workflow_message_id, started_at);
CREATE UNIQUE INDEX workflow_turns_open_message_idx
  ON workflow_turns(workflow_message_id) WHERE state = 'started';
CREATE INDEX workflow_turns_run_idx
  ON workflow_turns(run_id, state);
CREATE INDEX workflow_turns_session_idx
  ON workflow_turns(target_session_id, state, started_at);
CREATE INDEX workflow_turns_time_idx
  ON workflow_turns(coalesce(ended_at, started_at));
