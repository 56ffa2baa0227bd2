"""``host_commands``: recorded outcomes from ``command.recorded`` (§5.11); a prune unlinks."""

from __future__ import annotations

from typing import Final, get_args

from pwf.errors import Outcome
from pwf.events import CommandRecorded, Entry, LogPruned
from pwf.projections._sql import (
    Statement,
    dispatch,
    each,
    for_each_chunk,
    handlers,
    json_hash,
    on,
    quoted_list,
    text_hash,
)

NAME: Final = "host_commands"
VERSION: Final = 1

OPERATIONS: Final = (
    "run.start", "run.pause", "run.resume", "run.cancel", "run.status", "run.list",
    "checkpoint.answer", "decision.answer", "interaction.submit", "interaction.update",
    "workflowMessage.reportBranch", "workflowTurn.report", "sessionView.clearTerminal",
    "run.restart", "run.changeSettings", "followUp.queue", "followUp.remove", "session.record",
    "channel.reload", "channel.recover",
    "controller.list", "controller.get", "controller.apply", "controller.reconcile",
    "controller.delete",
    "host.status", "host.stop", "state.backup", "state.prune",
)  # fmt: skip
OUTCOMES: Final = get_args(Outcome)

DDL: Final = (
    f"""CREATE TABLE IF NOT EXISTS host_commands (
  request_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  operation TEXT NOT NULL CHECK (operation IN ({quoted_list(OPERATIONS)})),
  idempotency_key TEXT NOT NULL,
  request_fingerprint BLOB NOT NULL CHECK (length(request_fingerprint) = 32),
  run_id TEXT,
  accepted_revision INTEGER CHECK (accepted_revision IS NULL OR accepted_revision >= 0),
  outcome TEXT NOT NULL CHECK (outcome IN ({quoted_list(OUTCOMES)})),
  receipt_hash BLOB CHECK (receipt_hash IS NULL OR length(receipt_hash) = 32),
  error_hash BLOB CHECK (error_hash IS NULL OR length(error_hash) = 32),
  host_epoch INTEGER CHECK (host_epoch IS NULL OR host_epoch > 0),
  created_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  UNIQUE (client_id, idempotency_key)
) STRICT""",
)


_INSERT: Final = (
    "INSERT INTO host_commands (request_id, client_id, operation, idempotency_key,"
    " request_fingerprint, run_id, accepted_revision, outcome, receipt_hash, error_hash,"
    " host_epoch, created_at, completed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


_UNLINK: Final = "UPDATE host_commands SET run_id = NULL WHERE run_id IN ({})"
"""A pruned run's recorded commands stay, no longer naming it (ADR 0103)."""


HANDLERS: Final = handlers(
    on(
        CommandRecorded,
        _INSERT,
        lambda event, at: (
            event.request_id,
            event.client_id,
            event.operation,
            event.idempotency_key,
            bytes.fromhex(event.fingerprint),
            event.run_id,
            event.revision,
            event.outcome,
            json_hash(event.receipt),
            text_hash(event.error),
            event.host_epoch,
            at,
            at,
        ),
    ),
    each(
        LogPruned,
        lambda event, _at: for_each_chunk(_UNLINK, event.removed_run_ids),
    ),
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Insert one row per recorded outcome."""
    return dispatch(HANDLERS, entry)
