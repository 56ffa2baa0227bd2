CREATE TABLE run_workers (
  worker_epoch TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  generation INTEGER NOT NULL CHECK (generation > 0),
  host_epoch INTEGER CHECK (host_epoch IS NULL OR host_epoch > 0),
  launch_envelope_hash BLOB NOT NULL,
  pid INTEGER,
  process_start_identity TEXT,
  status TEXT NOT NULL CHECK (status IN (
    'starting', 'running', 'exited', 'cancelled', 'timedOut', 'crashed', 'claimLost', 'orphaned'
  )),
  started_at INTEGER NOT NULL,
  ready_at INTEGER,
  finished_at INTEGER,
  exit_code INTEGER,
  signal TEXT,
  diagnostic_hash BLOB,
  UNIQUE (run_id, generation)
) STRICT;
CREATE TABLE worker_messages (
  worker_epoch TEXT NOT NULL,
  message_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  operation TEXT NOT NULL,
  request_fingerprint BLOB NOT NULL CHECK (length(request_fingerprint) = 32),
  outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'adopted', 'rejected', 'claimLost')),
  accepted_revision INTEGER CHECK (accepted_revision IS NULL OR accepted_revision >= 0),
  result_hash BLOB,
  error_hash BLOB,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (worker_epoch, message_id)
) STRICT;
CREATE UNIQUE INDEX run_workers_active_idx ON run_workers(run_id)
  WHERE status IN ('starting', 'running');
