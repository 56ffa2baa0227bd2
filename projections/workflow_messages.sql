CREATE TABLE workflow_messages (
  workflow_message_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  target_session_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN (
    'step', 'decision', 'notification', 'terminal', 'followUp'
  )),
  source_id TEXT NOT NULL,
  content_hash BLOB NOT NULL,
  order_number INTEGER NOT NULL CHECK (order_number > 0),
  status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'cancelled')),
  pi_session_entry_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  latest_turn_id TEXT,
  latest_turn_state TEXT CHECK (latest_turn_state IS NULL OR latest_turn_state IN (
    'started', 'ended'
  )),
  latest_turn_started_at INTEGER,
  latest_turn_ended_at INTEGER,
  UNIQUE (target_session_id, order_number),
  CHECK ((status = 'sent') = (pi_session_entry_id IS NOT NULL)),
  CHECK ((latest_turn_id IS NULL) = (latest_turn_state IS NULL)),
  CHECK ((latest_turn_state = 'ended') = (latest_turn_ended_at IS NOT NULL))
) STRICT;
CREATE UNIQUE INDEX workflow_messages_pending_step_source_idx
  ON workflow_messages(source_id) WHERE kind = 'step' AND status = 'pending';
CREATE INDEX workflow_messages_read_terminal_idx
  ON workflow_messages(target_session_id, latest_turn_ended_at)
  WHERE status = 'sent' AND kind = 'terminal' AND latest_turn_state = 'ended';
CREATE INDEX workflow_messages_run_idx
  ON workflow_messages(run_id, order_number);
CREATE INDEX workflow_messages_session_idx
  ON workflow_messages(target_session_id, status, order_number);
CREATE INDEX workflow_messages_source_id_idx
  ON workflow_messages(source_id, order_number);
CREATE INDEX workflow_messages_source_idx
  ON workflow_messages(kind, source_id, order_number);
CREATE INDEX workflow_messages_unread_idx
  ON workflow_messages(target_session_id, order_number)
  WHERE status = 'sent' AND kind IN ('terminal', 'followUp')
  AND (latest_turn_state IS NULL OR latest_turn_state = 'started');
CREATE INDEX workflow_messages_updated_idx ON workflow_messages(updated_at);
