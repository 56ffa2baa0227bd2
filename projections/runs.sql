CREATE TABLE run_bindings (
  run_id TEXT PRIMARY KEY,
  origin_session_id TEXT NOT NULL,
  execution_mode TEXT NOT NULL CHECK (execution_mode IN ('interactive', 'headless')),
  created_at INTEGER NOT NULL
) STRICT;
CREATE TABLE run_checkpoints (
  run_id TEXT PRIMARY KEY,
  node_id TEXT NOT NULL,
  continuation_run_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE run_queue (
  run_id TEXT PRIMARY KEY,
  origin_session_id TEXT,
  status TEXT NOT NULL CHECK (status IN (
    'queued', 'starting', 'running', 'parked', 'done', 'failed', 'cancelled'
  )),
  generation INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
  owner_worker_epoch TEXT,
  lease_expires_at INTEGER,
  error_code TEXT,
  error_message TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK ((owner_worker_epoch IS NULL) = (lease_expires_at IS NULL))
) STRICT;
CREATE TABLE run_updates (
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL CHECK (sequence > 0),
  request_id TEXT NOT NULL,
  attempt_id TEXT NOT NULL,
  update_hash BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, sequence)
) STRICT;
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  parent_run_id TEXT,
  root_run_id TEXT NOT NULL,
  lineage_kind TEXT CHECK (lineage_kind IS NULL OR lineage_kind IN ('continuation', 'restart')),
  restart_number INTEGER NOT NULL DEFAULT 0 CHECK (restart_number >= 0),
  parent_terminal_fingerprint BLOB CHECK (
    parent_terminal_fingerprint IS NULL OR length(parent_terminal_fingerprint) = 32
  ),
  project_path TEXT NOT NULL,
  workflow_name TEXT NOT NULL,
  workflow_ref TEXT NOT NULL,
  workflow_source TEXT NOT NULL,
  definition_digest TEXT NOT NULL,
  definition_snapshot_hash BLOB,
  launch_options_hash BLOB NOT NULL,
  origin_session_id TEXT,
  execution_mode TEXT NOT NULL CHECK (execution_mode IN ('interactive', 'headless')),
  status TEXT NOT NULL CHECK (status IN (
    'queued', 'running', 'waiting', 'completed', 'failed', 'timed_out', 'cancelled'
  )),
  paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
  paused_at INTEGER,
  status_detail TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  input_hash BLOB NOT NULL,
  final_output_hash BLOB,
  error_hash BLOB,
  error_code TEXT,
  presentation_prompt_hash BLOB,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER,
  CHECK (
    (status IN ('waiting', 'completed', 'failed', 'timed_out', 'cancelled'))
    = (finished_at IS NOT NULL)
  ),
  CHECK ((parent_run_id IS NULL) = (lineage_kind IS NULL)),
  CHECK (
    (lineage_kind = 'restart' AND parent_terminal_fingerprint IS NOT NULL) OR
    (lineage_kind IS NOT 'restart' AND parent_terminal_fingerprint IS NULL)
  ),
  CHECK (parent_run_id IS NOT NULL OR restart_number = 0)
) STRICT;
CREATE INDEX run_bindings_session_idx ON run_bindings(origin_session_id);
CREATE INDEX run_queue_created_idx ON run_queue(created_at, run_id);
CREATE INDEX run_queue_lease_idx ON run_queue(lease_expires_at)
  WHERE owner_worker_epoch IS NOT NULL;
CREATE UNIQUE INDEX run_queue_session_active_idx
  ON run_queue(origin_session_id)
  WHERE origin_session_id IS NOT NULL AND status IN ('queued', 'starting', 'running');
CREATE INDEX run_queue_status_idx ON run_queue(status, created_at);
CREATE INDEX runs_created_idx ON runs(created_at, run_id);
CREATE INDEX runs_origin_idx ON runs(origin_session_id, created_at);
CREATE INDEX runs_parent_idx ON runs(parent_run_id);
CREATE INDEX runs_project_idx ON runs(project_path, created_at DESC);
CREATE UNIQUE INDEX runs_restart_parent_idx ON runs(parent_run_id)
  WHERE lineage_kind = 'restart';
CREATE INDEX runs_root_idx ON runs(root_run_id);
CREATE INDEX runs_status_idx ON runs(status, updated_at DESC);
