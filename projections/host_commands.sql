CREATE TABLE host_commands (
  request_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  operation TEXT NOT NULL CHECK (operation IN ('run.start', 'run.pause', 'run.resume', 'run.cancel', 'run.status', 'run.list', 'checkpoint.answer', 'decision.answer', 'interaction.submit', 'interaction.update', 'workflowMessage.reportBranch', 'workflowTurn.report', 'sessionView.clearTerminal', 'run.restart', 'run.changeSettings', 'followUp.queue', 'followUp.remove', 'session.record', 'channel.reload', 'channel.recover', 'controller.list', 'controller.get', 'controller.apply', 'controller.reconcile', 'controller.delete', 'host.status', 'host.stop', 'state.backup', 'state.prune')),
  idempotency_key TEXT NOT NULL,
  request_fingerprint BLOB NOT NULL CHECK (length(request_fingerprint) = 32),
  run_id TEXT,
  accepted_revision INTEGER CHECK (accepted_revision IS NULL OR accepted_revision >= 0),
  outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'adopted', 'rejected', 'conflict', 'notFound', 'claimLost', 'unavailable')),
  receipt_hash BLOB CHECK (receipt_hash IS NULL OR length(receipt_hash) = 32),
  error_hash BLOB CHECK (error_hash IS NULL OR length(error_hash) = 32),
  host_epoch INTEGER CHECK (host_epoch IS NULL OR host_epoch > 0),
  created_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  UNIQUE (client_id, idempotency_key)
) STRICT;
