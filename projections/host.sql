CREATE TABLE host_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  epoch INTEGER NOT NULL CHECK (epoch >= 0),
  host_id TEXT,
  token_hash BLOB,
  pid INTEGER,
  process_start_identity TEXT,
  started_at INTEGER,
  heartbeat_at INTEGER,
  expires_at INTEGER,
  CHECK (
    (host_id IS NULL AND token_hash IS NULL AND pid IS NULL AND process_start_identity IS NULL
      AND started_at IS NULL AND heartbeat_at IS NULL AND expires_at IS NULL)
    OR
    (host_id IS NOT NULL AND token_hash IS NOT NULL AND pid IS NOT NULL
      AND process_start_identity IS NOT NULL AND started_at IS NOT NULL
      AND heartbeat_at IS NOT NULL AND expires_at IS NOT NULL)
  )
) STRICT;
