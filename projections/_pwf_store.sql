CREATE VIEW events AS SELECT e.seq AS seq, b.batch AS batch, e.type AS type, b.at AS at, e.run_id AS run_id, e.session_id AS session_id, b.request_id AS request_id, b.client_id AS client_id, b.idempotency_key AS idempotency_key, nullif(lower(hex(e.content_hash)), '') AS content_hash, CASE WHEN w.seq IS NULL THEN nullif(lower(hex(coalesce(e.link, p.content_hash))), '') ELSE w.prev_hash END AS prev_hash, CASE WHEN w.seq IS NOT NULL THEN w.body WHEN e.data IS NULL THEN NULL ELSE CAST(printf('%s"contentHash":"%s","data":%s,"eventId":"evt-%d","prevHash":%s,"schema":"pwf.event.v1","seq":%d,"type":"%s"}', b.head, nullif(lower(hex(e.content_hash)), ''), e.data, e.seq, coalesce('"' || nullif(lower(hex(coalesce(e.link, p.content_hash))), '') || '"', 'null'), e.seq, e.type) AS BLOB) END AS body FROM _pwf_events e JOIN _pwf_batches b ON b.seq = e.head LEFT JOIN _pwf_whole w ON w.seq = e.seq LEFT JOIN _pwf_events p ON p.seq = e.seq - 1;
CREATE TABLE _pwf_batches (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  batch INTEGER NOT NULL CHECK (batch >= 1),
  at INTEGER NOT NULL,
  request_id TEXT,
  client_id TEXT,
  idempotency_key TEXT,
  head BLOB NOT NULL
) STRICT;
CREATE TABLE _pwf_checkpoint (
  projection TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) STRICT;
CREATE TABLE _pwf_events (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  head INTEGER NOT NULL,
  type TEXT NOT NULL,
  run_id TEXT,
  session_id TEXT,
  content_hash BLOB NOT NULL CHECK (length(content_hash) = 32),
  link BLOB CHECK (length(link) = 32),
  data BLOB
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
CREATE TABLE _pwf_pruned (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  leaf BLOB NOT NULL CHECK (length(leaf) = 32),
  taken INTEGER NOT NULL CHECK (taken >= 0)
) STRICT;
CREATE TABLE _pwf_tree (pos INTEGER PRIMARY KEY, hash BLOB NOT NULL CHECK (length(hash) = 32)) STRICT;
CREATE TABLE _pwf_whole (
  seq INTEGER PRIMARY KEY CHECK (seq >= 1),
  prev_hash TEXT,
  body BLOB NOT NULL
) STRICT;
CREATE INDEX _pwf_batches_batch ON _pwf_batches (batch);
CREATE INDEX _pwf_batches_request ON _pwf_batches (request_id) WHERE request_id IS NOT NULL;
CREATE INDEX _pwf_events_head ON _pwf_events (head);
CREATE INDEX _pwf_events_run ON _pwf_events (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX _pwf_events_session ON _pwf_events (session_id, seq) WHERE session_id IS NOT NULL;
CREATE INDEX _pwf_events_type ON _pwf_events (type, seq);
