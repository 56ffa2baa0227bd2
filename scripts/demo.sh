#!/usr/bin/env bash
# A realistic run of pwf's main job on the embedded default: a workflow host's
# command log is appended batch by batch, verified, exported, imported on
# "another machine" byte for byte, and then tampered with to show the audit.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=demo-state
rm -rf "$dir"
db="$dir/host.db"

step() { printf '\n== %s\n' "$*"; }

step "create the state database"
pwf init --db "$db"

step "a workflow host records 2000 commands (seeded, realistic mix)"
python bench/workload.py --db "$db" --batches 2000 --seed 7

step "the last events of the log"
pwf log tail --db "$db" -n 5

step "one event, as stored (canonical JSON, hash-chained)"
pwf log show --db "$db" --from 2 --to 2 --json

step "verify the hash chain from the stored bytes"
pwf log verify --db "$db"

step "export the log and import it into a second database"
pwf log export --db "$db" --out "$dir/log.jsonl"
pwf log import --db "$dir/copy.db" "$dir/log.jsonl"
pwf log export --db "$dir/copy.db" | cmp - "$dir/log.jsonl"
echo "round trip: byte for byte identical ($(wc -l < "$dir/log.jsonl") events)"

step "tamper with one byte of event 1234 in a copy, then verify again"
cp "$db" "$dir/tampered.db"
python - "$dir/tampered.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(body,) = db.execute("SELECT body FROM events WHERE seq = 1234").fetchone()
db.execute("UPDATE events SET body = ? WHERE seq = 1234", (body.replace(b"run-", b"rum-", 1),))
db.commit()
PY
if pwf log verify --db "$dir/tampered.db"; then
    echo "tampering went unnoticed" >&2
    exit 1
else
    echo "verify exited $? and named the first bad seq"
fi
