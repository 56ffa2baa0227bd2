#!/usr/bin/env bash
# A realistic run of pwf's main job on the embedded default: coordinators and
# workers drive runs through the command path (client and worker protocol),
# every outcome lands in the hash-chained log and its projections, and the log
# is verified, exported, imported on "another machine" byte for byte, and then
# tampered with to show the audit; old runs are pruned (their events' bytes move to the backup),
# and the pruned log is proven against its backup.  It ends as operators
# and auditors use pwf: replay the log to where an interaction was waiting and
# explain it, then rebuild a copy and diff it against the live database.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PWF_DEMO_DIR:-demo-state}
runs=${PWF_DEMO_RUNS:-100}
rm -rf "$dir"
db="$dir/host.db"

step() { printf '\n== %s\n' "$*"; }

step "create the state database"
pwf init --db "$db"
absdir=$(cd "$dir" && pwd)

step "a coordinator starts a run (one canonical request line in, one response line out)"
pwf request --db "$db" --at 1785600000000 <<'EOF'
{"clientId":"coordinator-demo","idempotencyKey":"start-demo","operation":"run.start","payload":{"definitionDigest":"sha256:9f2c","definitionSnapshot":{"nodes":["draft"]},"input":{"version":"2.0.0"},"originSessionId":"session-demo","projectPath":"/srv/project","workflowName":"release-notes","workflowSource":{"id":"release-notes","kind":"builtin","revision":"2.0.0"},"workflowSourceRef":"builtin:release-notes"},"requestId":"demo-1","runId":"run-demo","schema":"pi-workflows.client.v1","type":"request"}
EOF

step "a worker claims the run and reports ready"
envelope=$(pwf worker launch run-demo --db "$db" --at 1785600001000)
echo "$envelope"
epoch=$(printf '%s' "$envelope" | python -c 'import json,sys; print(json.load(sys.stdin)["workerEpoch"])')
pwf worker --db "$db" --at 1785600002000 <<EOF
{"expectedRevision":0,"generation":1,"kind":"worker.ready","launchSchema":"pi-workflows.worker-launch.v1","messageId":"m-1","operation":"worker.ready","payload":{},"runId":"run-demo","schema":"pi-workflows.worker-message.v1","workerEpoch":"$epoch"}
EOF

step "the same request retried after a lost response is adopted, not run twice"
pwf request --db "$db" --at 1785600003000 <<'EOF'
{"clientId":"coordinator-demo","idempotencyKey":"start-demo","operation":"run.start","payload":{"definitionDigest":"sha256:9f2c","definitionSnapshot":{"nodes":["draft"]},"input":{"version":"2.0.0"},"originSessionId":"session-demo","projectPath":"/srv/project","workflowName":"release-notes","workflowSource":{"id":"release-notes","kind":"builtin","revision":"2.0.0"},"workflowSourceRef":"builtin:release-notes"},"requestId":"demo-2","runId":"run-demo","schema":"pi-workflows.client.v1","type":"request"}
EOF

step "$runs more runs: start, claim, park on an agent step, submit, validate (some rejected), finish"
python scripts/demo_traffic.py --db "$db" --runs "$runs" --seed 7

step "one session end to end: park, deliver, reminder, pause/resume, validate, finish, restart"
python scripts/demo_session.py --db "$db"
pwf query turns --db "$db" --session session-release --time-format iso
pwf query messages --db "$db" --session session-release --columns order_number,kind,status,created_at --time-format iso

step "what the projections say"
pwf query runs --db "$db" --limit 4 --columns run_id,status,queue_status,updated_at --time-format iso
pwf query interactions --db "$db" --limit 4 --columns request_id,status,created_at --time-format iso
pwf query messages --db "$db" --limit 4 --columns order_number,kind,status,created_at --time-format iso

step "the last events of the log"
pwf log tail --db "$db" -n 5 --columns seq,at,type,run --time-format iso

step "one event, as stored (canonical JSON, hash-chained)"
pwf log show --db "$db" --from 2 --to 2 --json

step "verify the hash chain from the stored bytes"
pwf log verify --db "$db"

step "export the log and import it into a second database"
pwf log export --db "$db" --out "$dir/log.jsonl"
pwf log import --db "$dir/copy.db" "$dir/log.jsonl"
pwf log export --db "$dir/copy.db" | cmp - "$dir/log.jsonl"
echo "round trip: byte for byte identical ($(wc -l < "$dir/log.jsonl") events)"

step "tamper with one byte of an event in the middle of the log, in a copy, then verify again"
cp "$db" "$dir/tampered.db"
python - "$dir/tampered.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
seq, data = db.execute(
    "SELECT seq, data FROM _pwf_events WHERE instr(data, 'run-') > 0"
    " ORDER BY seq LIMIT 1 OFFSET (SELECT count(*) / 2 FROM _pwf_events WHERE instr(data, 'run-') > 0)"
).fetchone()
db.execute("UPDATE _pwf_events SET data = ? WHERE seq = ?", (data.replace(b"run-", b"rum-", 1), seq))
print(f"changed one byte of event {seq} as stored")
db.commit()
PY
if pwf log verify --db "$dir/tampered.db"; then
    echo "tampering went unnoticed" >&2
    exit 1
else
    echo "verify exited $? and named the first bad seq"
fi

step "maintenance: which run trees finished before 16:30 UTC could go?"
echo "(a dry run deletes nothing; like every executed command it is recorded in the log as one"
echo " command.recorded event for state.prune, carrying the report below)"
pwf state prune --db "$db" --before 2026-08-01T16:30:00Z --at 1785800000000

step "prune them: back up, then take their events' bytes out of the log; every seq, hash and proof stays"
pwf state prune --db "$db" --before 2026-08-01T16:30:00Z --at 1785800001000 --apply --backup "$absdir/backups/before-prune.sqlite"
pwf log show --db "$db" --type log.pruned --json | python -c '
import json, sys
event = json.loads(sys.stdin.readline())
data = event["data"]
print(f"seq {event['"'"'seq'"'"']}: log.pruned after head seq {data['"'"'backupSeq'"'"']};"
      f" {len(data['"'"'removedRunIds'"'"'])} runs; the bytes of {data['"'"'removedEvents'"'"']} events"
      " moved to the backup, their seqs, hashes and Merkle leaves kept")'
pwf log verify --db "$db" --backup "$dir/backups/before-prune.sqlite"
pwf verify --db "$db"

step "operators: where was the session's interaction waiting? replay the log to that seq and explain it"
seq=$(pwf log show --db "$db" --type submission.recorded --run run-session --json | python -c 'import json,sys; print(json.loads(sys.stdin.readline())["seq"])')
echo "the submission was recorded at seq $seq"
echo "(older runs were pruned before it: seqs kept their place, and the backup holds their bytes)"
pwf replay --db "$dir/backups/before-prune.sqlite" --until "$seq" --out "$dir/at-waiting.db"
pwf explain interaction interaction-run-session-attempt-release-1 --db "$dir/at-waiting.db" --time-format iso | tail -n 4
echo "and now, at the head of the log:"
pwf explain interaction interaction-run-session-attempt-release-1 --db "$db" | tail -n 2

step "auditors: rebuild a copy from its log, diff it against the live database, compare digests"
cp "$db" "$dir/rebuilt.db"
pwf rebuild --db "$dir/rebuilt.db"
pwf diff "$db" "$dir/rebuilt.db"
pwf digest "$db" | tail -n 1
pwf digest "$dir/rebuilt.db" | tail -n 1
pwf verify --db "$db"

step "served: pwf serve supervises a pwf worker run worker per run; a session is played through its socket"
served="$dir/served.db"
pwf init --db "$served"
pwf serve --db "$served" --worker-command "pwf worker run" --metrics 127.0.0.1:0 \
  2> "$dir/served-host.log" &
host_pid=$!
trap 'kill "$host_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do [ -S "$dir/host/host.sock" ] && break; sleep 0.1; done
metrics=$(sed -n 's/.*metrics on \(http[^ ]*\).*/\1/p' "$dir/served-host.log")
echo "the host's Prometheus metrics: $metrics (health: ${metrics%/metrics}/healthz; docs/metrics.md)"
python scripts/demo_served.py --db "$served"
echo "one scrape of $metrics after the session (histogram buckets left out):"
python - "$metrics" <<'PY'
import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:
    for line in answer.read().decode().splitlines():
        if line.startswith("pwf_") and "_bucket{" not in line:
            print("  " + line)
PY
kill -TERM "$host_pid"
wait "$host_pid"
trap - EXIT
pwf query runs --db "$served"
pwf log show --db "$served" --type worker.ended
echo "the host's own log:"
sed 's/^/  /' "$dir/served-host.log"

step "the overview an operator starts from"
pwf status --db "$db" --now 2026-08-03T23:40:00Z --time-format iso

step "what to try next on $db"
cat <<EOF
  pwf status --db $db                     what is waiting, and why
  pwf log show --db $db --type run.finished --time-format iso
  pwf query runs --db $db --status failed --csv
  pwf explain run run-session --db $db    a run's timeline and diagnosis
  pwf log tail --db $db --follow          new events as they are appended
  sqlite3 $db 'SELECT run_id, status, created_at FROM readable_runs LIMIT 5'
  pwf explain run run-ask --db $served    the served run: its worker epochs, the rejected and accepted answers
  pwf log show --db $served --type worker.ended
                                          how each supervised worker ended (worker.attached: which process it was)
  pwf serve --db $served --worker-command "pwf worker run"
                                          serve it again and send it request lines with pwf call (docs/serving.md)
EOF
