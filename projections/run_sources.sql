CREATE TABLE run_sources (
  run_id TEXT NOT NULL,
  mount_path TEXT NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('builtin', 'file')),
  source_ref TEXT NOT NULL,
  source_revision TEXT NOT NULL,
  PRIMARY KEY (run_id, mount_path)
) STRICT;
