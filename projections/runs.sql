CREATE TRIGGER run_queue_totals_delete AFTER DELETE ON run_queue BEGIN
  UPDATE runs_totals SET queue_rows = queue_rows + -1, listed = listed + -(SELECT count(*) FROM runs WHERE run_id = OLD.run_id), revisions = revisions + -0, contradictions = contradictions + -(SELECT count(*) FROM runs r WHERE r.run_id = OLD.run_id AND (NOT (CASE r.status WHEN 'queued' THEN OLD.status IN ('queued') WHEN 'running' THEN OLD.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN OLD.status IN ('parked') WHEN 'completed' THEN OLD.status IN ('done') WHEN 'failed' THEN OLD.status IN ('failed') WHEN 'timed_out' THEN OLD.status IN ('failed') WHEN 'cancelled' THEN OLD.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
  DELETE FROM runs_totals WHERE queue_rows = 0 AND revisions = 0;
END;
CREATE TRIGGER run_queue_totals_insert AFTER INSERT ON run_queue BEGIN
  INSERT OR IGNORE INTO runs_totals VALUES (1, 0, 0, 0, 0);
  UPDATE runs_totals SET queue_rows = queue_rows + 1, listed = listed + (SELECT count(*) FROM runs WHERE run_id = NEW.run_id), revisions = revisions + 0, contradictions = contradictions + (SELECT count(*) FROM runs r WHERE r.run_id = NEW.run_id AND (NOT (CASE r.status WHEN 'queued' THEN NEW.status IN ('queued') WHEN 'running' THEN NEW.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN NEW.status IN ('parked') WHEN 'completed' THEN NEW.status IN ('done') WHEN 'failed' THEN NEW.status IN ('failed') WHEN 'timed_out' THEN NEW.status IN ('failed') WHEN 'cancelled' THEN NEW.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
END;
CREATE TRIGGER run_queue_totals_rekey AFTER UPDATE OF run_id ON run_queue WHEN NEW.run_id IS NOT OLD.run_id BEGIN
  UPDATE runs_totals SET queue_rows = queue_rows + 1 - 1, listed = listed + (SELECT count(*) FROM runs WHERE run_id = NEW.run_id) - (SELECT count(*) FROM runs WHERE run_id = OLD.run_id), revisions = revisions + 0 - 0, contradictions = contradictions + (SELECT count(*) FROM runs r WHERE r.run_id = NEW.run_id AND (NOT (CASE r.status WHEN 'queued' THEN NEW.status IN ('queued') WHEN 'running' THEN NEW.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN NEW.status IN ('parked') WHEN 'completed' THEN NEW.status IN ('done') WHEN 'failed' THEN NEW.status IN ('failed') WHEN 'timed_out' THEN NEW.status IN ('failed') WHEN 'cancelled' THEN NEW.status IN ('cancelled') ELSE 0 END))) - (SELECT count(*) FROM runs r WHERE r.run_id = OLD.run_id AND (NOT (CASE r.status WHEN 'queued' THEN OLD.status IN ('queued') WHEN 'running' THEN OLD.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN OLD.status IN ('parked') WHEN 'completed' THEN OLD.status IN ('done') WHEN 'failed' THEN OLD.status IN ('failed') WHEN 'timed_out' THEN OLD.status IN ('failed') WHEN 'cancelled' THEN OLD.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
END;
CREATE TRIGGER run_queue_totals_status AFTER UPDATE OF status ON run_queue WHEN NEW.run_id IS OLD.run_id AND NEW.status IS NOT OLD.status BEGIN
  UPDATE runs_totals SET contradictions = contradictions + coalesce((SELECT (NOT (CASE r.status WHEN 'queued' THEN NEW.status IN ('queued') WHEN 'running' THEN NEW.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN NEW.status IN ('parked') WHEN 'completed' THEN NEW.status IN ('done') WHEN 'failed' THEN NEW.status IN ('failed') WHEN 'timed_out' THEN NEW.status IN ('failed') WHEN 'cancelled' THEN NEW.status IN ('cancelled') ELSE 0 END)) - (NOT (CASE r.status WHEN 'queued' THEN OLD.status IN ('queued') WHEN 'running' THEN OLD.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN OLD.status IN ('parked') WHEN 'completed' THEN OLD.status IN ('done') WHEN 'failed' THEN OLD.status IN ('failed') WHEN 'timed_out' THEN OLD.status IN ('failed') WHEN 'cancelled' THEN OLD.status IN ('cancelled') ELSE 0 END)) FROM runs r WHERE r.run_id = NEW.run_id), 0) WHERE id = 1;
END;
CREATE TRIGGER runs_totals_delete AFTER DELETE ON runs BEGIN
  UPDATE runs_totals SET queue_rows = queue_rows + -0, listed = listed + -(SELECT count(*) FROM run_queue WHERE run_id = OLD.run_id), revisions = revisions + -OLD.revision, contradictions = contradictions + -(SELECT count(*) FROM run_queue q WHERE q.run_id = OLD.run_id AND (NOT (CASE OLD.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
  DELETE FROM runs_totals WHERE queue_rows = 0 AND revisions = 0;
END;
CREATE TRIGGER runs_totals_insert AFTER INSERT ON runs BEGIN
  INSERT OR IGNORE INTO runs_totals VALUES (1, 0, 0, 0, 0);
  UPDATE runs_totals SET queue_rows = queue_rows + 0, listed = listed + (SELECT count(*) FROM run_queue WHERE run_id = NEW.run_id), revisions = revisions + NEW.revision, contradictions = contradictions + (SELECT count(*) FROM run_queue q WHERE q.run_id = NEW.run_id AND (NOT (CASE NEW.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
END;
CREATE TRIGGER runs_totals_rekey AFTER UPDATE OF run_id ON runs WHEN NEW.run_id IS NOT OLD.run_id BEGIN
  UPDATE runs_totals SET queue_rows = queue_rows + 0 - 0, listed = listed + (SELECT count(*) FROM run_queue WHERE run_id = NEW.run_id) - (SELECT count(*) FROM run_queue WHERE run_id = OLD.run_id), revisions = revisions + NEW.revision - OLD.revision, contradictions = contradictions + (SELECT count(*) FROM run_queue q WHERE q.run_id = NEW.run_id AND (NOT (CASE NEW.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END))) - (SELECT count(*) FROM run_queue q WHERE q.run_id = OLD.run_id AND (NOT (CASE OLD.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END))) WHERE id = 1;
END;
CREATE TRIGGER runs_totals_revision AFTER UPDATE OF revision ON runs WHEN NEW.run_id IS OLD.run_id AND NEW.status IS OLD.status BEGIN
  UPDATE runs_totals SET revisions = revisions + NEW.revision - OLD.revision WHERE id = 1;
END;
CREATE TRIGGER runs_totals_status AFTER UPDATE OF status ON runs WHEN NEW.run_id IS OLD.run_id AND NEW.status IS NOT OLD.status BEGIN
  UPDATE runs_totals SET revisions = revisions + NEW.revision - OLD.revision, contradictions = contradictions + coalesce((SELECT (NOT (CASE NEW.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END)) - (NOT (CASE OLD.status WHEN 'queued' THEN q.status IN ('queued') WHEN 'running' THEN q.status IN ('starting', 'running', 'parked') WHEN 'waiting' THEN q.status IN ('parked') WHEN 'completed' THEN q.status IN ('done') WHEN 'failed' THEN q.status IN ('failed') WHEN 'timed_out' THEN q.status IN ('failed') WHEN 'cancelled' THEN q.status IN ('cancelled') ELSE 0 END)) FROM run_queue q WHERE q.run_id = NEW.run_id), 0) WHERE id = 1;
END;
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
CREATE TABLE runs_totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  queue_rows INTEGER NOT NULL CHECK (queue_rows >= 0),
  listed INTEGER NOT NULL CHECK (listed >= 0),
  revisions INTEGER NOT NULL CHECK (revisions >= 0),
  contradictions INTEGER NOT NULL CHECK (contradictions >= 0)
) STRICT;
CREATE INDEX run_bindings_session_idx ON run_bindings(origin_session_id);
CREATE INDEX run_queue_created_idx ON run_queue(created_at, run_id);
CREATE INDEX run_queue_lease_idx ON run_queue(lease_expires_at)
  WHERE owner_worker_epoch IS NOT NULL;
CREATE UNIQUE INDEX run_queue_session_active_idx
  ON run_queue(origin_session_id)
  WHERE origin_session_id IS NOT NULL AND status IN ('queued', 'starting', 'running');
CREATE INDEX run_queue_status_idx ON run_queue(status, created_at);
CREATE INDEX run_queue_updated_idx ON run_queue(updated_at);
CREATE INDEX runs_created_idx ON runs(created_at, run_id);
CREATE INDEX runs_origin_idx ON runs(origin_session_id, created_at);
CREATE INDEX runs_parent_idx ON runs(parent_run_id);
CREATE UNIQUE INDEX runs_restart_parent_idx ON runs(parent_run_id)
  WHERE lineage_kind = 'restart';
CREATE INDEX runs_root_idx ON runs(root_run_id);
CREATE INDEX runs_status_idx ON runs(status, updated_at DESC);
