CREATE TABLE _pwf_checkpoint (
  projection TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) STRICT;
CREATE TABLE _pwf_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL,
  content_hash TEXT,
  batch INTEGER NOT NULL
) STRICT;
CREATE TABLE _pwf_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
CREATE TABLE _pwf_tree (pos INTEGER PRIMARY KEY, hash BLOB NOT NULL CHECK (length(hash) = 32)) STRICT;
CREATE TABLE events (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  batch INTEGER NOT NULL CHECK (batch >= 1),
  type TEXT NOT NULL,
  at INTEGER NOT NULL,
  run_id TEXT,
  session_id TEXT,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  content_hash TEXT NOT NULL UNIQUE,
  prev_hash TEXT,
  body BLOB NOT NULL
) STRICT;
CREATE INDEX events_batch ON events (batch);
CREATE INDEX events_request ON events (request_id, seq) WHERE request_id IS NOT NULL;
CREATE INDEX events_run ON events (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX events_session ON events (session_id, seq) WHERE session_id IS NOT NULL;
CREATE INDEX events_type ON events (type, seq);
