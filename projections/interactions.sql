CREATE TABLE interactive_requests (
  request_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  attempt_id TEXT NOT NULL UNIQUE,
  target_session_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('agent', 'assistant', 'decision')),
  contract_hash BLOB NOT NULL,
  revision INTEGER NOT NULL DEFAULT 1 CHECK (revision > 0),
  status TEXT NOT NULL CHECK (status IN ('pending', 'settled', 'cancelled')),
  unproductive_turn_ends INTEGER NOT NULL DEFAULT 0 CHECK (unproductive_turn_ends >= 0),
  accepted_submission_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  settled_at INTEGER,
  consumed_at INTEGER,
  CHECK ((status = 'settled') = (accepted_submission_id IS NOT NULL AND settled_at IS NOT NULL)),
  CHECK (consumed_at IS NULL OR status = 'settled')
) STRICT;
CREATE TABLE interactive_submissions (
  submission_id TEXT PRIMARY KEY,
  request_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_revision INTEGER NOT NULL CHECK (request_revision > 0),
  payload_hash BLOB NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('validating', 'accepted', 'rejected', 'adopted')),
  receipt_hash BLOB,
  submitted_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (request_id, idempotency_key)
) STRICT;
CREATE INDEX interactive_requests_created_idx
  ON interactive_requests(created_at, request_id);
CREATE INDEX interactive_requests_open_idx
  ON interactive_requests(status, created_at)
  WHERE status = 'pending' OR (status = 'settled' AND consumed_at IS NULL);
CREATE INDEX interactive_requests_run_idx
  ON interactive_requests(run_id, status, created_at);
CREATE INDEX interactive_requests_session_idx
  ON interactive_requests(target_session_id, status, created_at);
CREATE UNIQUE INDEX interactive_submissions_validating_idx
  ON interactive_submissions(request_id) WHERE outcome = 'validating';
