CREATE TABLE node_attempts (
  attempt_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  node_id TEXT NOT NULL,
  attempt_number INTEGER NOT NULL CHECK (attempt_number > 0),
  status TEXT NOT NULL CHECK (status IN (
    'pending', 'running', 'waiting', 'interrupted', 'completed', 'failed', 'timed_out', 'cancelled'
  )),
  output_hash BLOB,
  started_at INTEGER,
  deadline_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, node_id, attempt_number)
) STRICT;
CREATE UNIQUE INDEX node_attempts_active_idx ON node_attempts(run_id)
  WHERE status IN ('pending', 'running', 'waiting');
