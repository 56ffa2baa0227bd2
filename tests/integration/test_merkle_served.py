"""A proof of a request's events exists as soon as the served host answers it (ADR 0083)."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

from pwf import merkle

if TYPE_CHECKING:
    from tests.integration._served import PWF, Served, line, rows, run_start, short_dir
else:
    from _served import PWF, Served, line, rows, run_start, short_dir


def test_every_answered_request_is_proven_at_once() -> None:
    """After each answer `pwf log prove` of the request's seqs verifies against the head's root."""
    with short_dir() as directory:
        db = directory / "state.db"
        assert 0 == subprocess.run([PWF, "init", "--db", str(db)], check=False).returncode
        served = Served(db)
        try:
            client = served.client()
            for number in range(1, 7):
                for request in (run_start(number), line("host.status", rid=f"s-{number}")):
                    answer = client.request(request)
                    assert answer["outcome"] == "accepted", answer
                    rid = str(answer["requestId"])
                    seqs = [
                        row[0]
                        for row in rows(db, "SELECT seq FROM events WHERE request_id = ?", rid)
                    ]
                    assert seqs, rid
                    # Stored with the events, in the transaction the answer waited for:
                    [(events, nodes)] = rows(
                        db, "SELECT count(*), (SELECT count(*) FROM _pwf_tree) FROM events"
                    )
                    assert merkle.stored_for(events) == nodes
                    for seq in seqs:
                        proved = subprocess.run(
                            [PWF, "log", "prove", str(seq), "--db", str(db), "--json"],
                            capture_output=True,
                            check=False,
                        )
                        assert 0 == proved.returncode, proved.stderr
                        proof = json.loads(proved.stdout)
                        [(body,)] = rows(db, "SELECT body FROM events WHERE seq = ?", seq)
                        assert merkle.verify_inclusion(
                            merkle.leaf_hash(bytes(body)),
                            proof["index"],
                            proof["treeSize"],
                            [bytes.fromhex(item) for item in proof["path"]],
                            bytes.fromhex(proof["rootHash"]),
                        )
            client.close()
            assert 0 == served.terminate()
        finally:
            served.close()
