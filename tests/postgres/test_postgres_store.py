"""What the PostgreSQL log adds to the contract: schema, format row, idempotency keys, errors."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pwf import merkle
from pwf.errors import ChainError, StoreError
from pwf.events import Actor, Event, Sealed
from pwf.store import Head
from pwf.store.postgres import FORMAT, PostgresStore, shown_url
from pwf.store.rows import columns
from pwf.store.sealing import seal_batch

AT = 1_764_403_200_000
ACTOR = Actor(type="session", id="session-main")


class TestSchema:
    """``create`` installs the schema once; opening checks the format row."""

    def test_install_is_idempotent(self, pg_url: str, command: Any) -> None:
        """Creating again keeps the log, its events and its id."""
        with PostgresStore(pg_url, create=True) as first:
            first.append([command(1)], at=AT, actor=ACTOR)
            log_id = first.log_id
        with PostgresStore(pg_url, create=True) as again:
            assert (1, log_id) == (again.head().seq, again.log_id)
        assert 36 == len(log_id)

    def test_format_row(self, pg_url: str) -> None:
        """The format row names the same log format as SQLite's."""
        PostgresStore(pg_url, create=True).close()
        with psycopg.connect(pg_url) as connection:
            row = connection.execute("SELECT value FROM _pwf_meta WHERE key = 'format'").fetchone()
        assert ("pwf.store.v2",) == row
        assert "pwf.store.v2" == FORMAT

    def test_an_empty_database_is_not_a_log(self, pg_url: str) -> None:
        """Opening without ``create`` a database that holds no log says how to make one."""
        with pytest.raises(StoreError, match=r"not a pwf log .*pwf init --store"):
            PostgresStore(pg_url)

    def test_another_programs_events_table_is_refused(self, pg_url: str) -> None:
        """A database with someone else's ``events`` table is left alone."""
        with psycopg.connect(pg_url, autocommit=True) as connection:
            connection.execute("CREATE TABLE events (id int)")
        with pytest.raises(StoreError, match="another program's events table"):
            PostgresStore(pg_url, create=True)

    def test_unreachable_server_is_one_line(self, tmp_path: Any) -> None:
        """A server that is not there is a StoreError of one line naming the URL."""
        url = f"postgresql://pwf:secret@/nowhere?host={tmp_path}"
        with pytest.raises(StoreError, match="cannot reach PostgreSQL") as caught:
            PostgresStore(url, connect_timeout=2)
        assert "\n" not in str(caught.value)
        assert "secret" not in str(caught.value)

    def test_shown_url_hides_the_password(self) -> None:
        """Messages never carry the password."""
        assert "postgresql://me:***@db/x" == shown_url("postgresql://me:pw@db/x")


class TestIdempotencyKeys:
    """PostgreSQL holds ``host_commands``'s uniqueness over every host's records."""

    def test_second_record_of_a_client_key_is_refused(self, pg_url: str, command: Any) -> None:
        """A second ``command.recorded`` for one client + key appends nothing."""
        with PostgresStore(pg_url, create=True) as one, PostgresStore(pg_url) as two:
            one.append([command(1, idempotency_key="k")], at=AT, actor=ACTOR)
            head = one.head()
            with pytest.raises(StoreError, match="already recorded this request"):
                two.append([command(2, idempotency_key="k")], at=AT, actor=ACTOR)
            assert head == two.head()
            assert two.verify().ok

    def test_second_record_of_a_request_id_is_refused(self, pg_url: str, command: Any) -> None:
        """A second ``command.recorded`` for one request id appends nothing."""
        with PostgresStore(pg_url, create=True) as one:
            one.append([command(1, request_id="r")], at=AT, actor=ACTOR)
            with pytest.raises(StoreError, match="already recorded this request"):
                one.append([command(2, request_id="r")], at=AT, actor=ACTOR)
            assert 1 == one.head().seq


class TestHead:
    """The head moves by compare-and-set: a stale writer cannot fork the chain."""

    def test_rows_that_do_not_continue_the_head_are_refused(
        self, pg_url: str, command: Any
    ) -> None:
        """Rows sealed against an old head are refused, and nothing is written."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(1)], at=AT, actor=ACTOR)
            moved = pytest.raises(ChainError, match="another writer moved the log's head")
            with psycopg.connect(pg_url, autocommit=True) as rogue:
                rogue.execute("SET lock_timeout = '2s'")
                with moved, store.transaction() as tx:
                    tx.write_rows(_rows(tx.head, command(2)), last_write=True)
                    rogue.execute("UPDATE _pwf_head SET seq = 7 WHERE id = 1")
            assert 7 == store.head().seq
            with psycopg.connect(pg_url) as connection:
                found = connection.execute("SELECT count(*) FROM events").fetchone()
                records = connection.execute("SELECT count(*) FROM _pwf_recorded").fetchone()
            assert ((1,), (1,)) == (found, records)

    def test_a_refused_last_write_leaves_the_connection_usable(
        self, pg_url: str, command: Any
    ) -> None:
        """A held-back write that breaks a uniqueness rule fails the commit with one line."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(1, request_id="r")], at=AT, actor=ACTOR)
            again = pytest.raises(StoreError, match="already recorded this request")
            with again, store.transaction() as tx:
                tx.write_rows(_rows(tx.head, command(2, request_id="r")), last_write=True)
            store.append([command(3)], at=AT, actor=ACTOR)
            assert 2 == store.head().seq
            assert store.verify().ok

    @pytest.mark.parametrize("size", [1, 2, 300])
    def test_a_batch_of_any_size_is_written_with_its_records(
        self, pg_url: str, command: Any, size: int
    ) -> None:
        """One statement writes a small batch; a batch too big for one statement still lands."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(0)], at=AT, actor=ACTOR)
            store.append([command(n) for n in range(1, size + 1)], at=AT, actor=ACTOR)
            assert size + 1 == store.head().seq
            assert 2 == store.head().batch
            assert store.verify().ok
            with psycopg.connect(pg_url) as connection:
                found = connection.execute(
                    "SELECT count(*), min(seq), max(seq) FROM _pwf_recorded"
                ).fetchone()
            assert (size + 1, 1, size + 1) == found
            with pytest.raises(StoreError, match="already recorded this request"):
                store.append([command(size + 1), command(size)], at=AT, actor=ACTOR)
            assert size + 1 == store.head().seq

    def test_a_failed_transaction_leaves_the_connection_usable(
        self, pg_url: str, command: Any
    ) -> None:
        """After a refused batch the next transaction starts clean and appends."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(1, request_id="r")], at=AT, actor=ACTOR)
            with pytest.raises(StoreError, match="already recorded this request"):
                store.append([command(2, request_id="r")], at=AT, actor=ACTOR)
            inside = pytest.raises(RuntimeError, match="inside")
            with inside, store.transaction() as tx:
                tx.append([command(3)], at=AT, actor=ACTOR)
                raise RuntimeError("inside")
            store.append([command(4)], at=AT, actor=ACTOR)
            assert 2 == store.head().seq
            assert store.verify().ok


class TestCommitIfHead:
    """A write decided ahead of the lock lands only on the head it was sealed against (ADR 0062)."""

    @pytest.mark.parametrize("size", [1, 300])
    def test_a_batch_of_any_size_lands_on_its_head(
        self, pg_url: str, command: Any, size: int
    ) -> None:
        """One pipeline for a small batch; a batch too big for one statement still lands."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(0)], at=AT, actor=ACTOR)
            head = store.head()
            events = [command(n) for n in range(1, size + 1)]
            sealed = seal_batch(events, head, head.batch + 1, at=AT, actor=ACTOR, cause=None)
            assert store.commit_if_head(head, [(*columns(s.entry), s.body) for s in sealed])
            assert (size + 1, 2) == (store.head().seq, store.head().batch)
            assert store.verify().ok
            with psycopg.connect(pg_url) as connection:
                found = connection.execute("SELECT count(*) FROM _pwf_recorded").fetchone()
            assert (size + 1,) == found

    @pytest.mark.parametrize("size", [1, 300])
    def test_a_moved_head_writes_nothing(self, pg_url: str, command: Any, size: int) -> None:
        """Rows sealed against an old head: False, nothing written, the connection usable."""
        with PostgresStore(pg_url, create=True) as store:
            old = store.head()
            store.append([command(0)], at=AT, actor=ACTOR)
            events = [command(n) for n in range(1, size + 1)]
            sealed = seal_batch(events, old, old.batch + 1, at=AT, actor=ACTOR, cause=None)
            assert not store.commit_if_head(old, [(*columns(s.entry), s.body) for s in sealed])
            assert 1 == store.head().seq
            assert not store.commit_if_head(old, [])
            assert store.commit_if_head(store.head(), [])
            store.append([command(1)], at=AT, actor=ACTOR)
            assert 2 == store.head().seq
            assert store.verify().ok

    def test_many_stale_writes_leave_the_connection_usable(self, pg_url: str, command: Any) -> None:
        """Stale writes, each after another writer's and before a good one, break nothing."""
        with PostgresStore(pg_url, create=True) as store:
            for n in range(12):
                old = store.head()
                store.append([command(100 + n)], at=AT, actor=ACTOR)
                for _ in range(2):
                    assert not store.commit_if_head(old, _rows(old, command(n)))
                head = store.head()
                assert store.commit_if_head(head, _rows(head, command(200 + n)))
            assert 24 == store.head().seq
            assert store.verify().ok

    def test_a_refused_write_is_one_line_and_writes_nothing(
        self, pg_url: str, command: Any
    ) -> None:
        """A write breaking a uniqueness rule on the right head fails with one line."""
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(1, request_id="r")], at=AT, actor=ACTOR)
            head = store.head()
            with pytest.raises(StoreError, match="already recorded this request"):
                store.commit_if_head(head, _rows(head, command(2, request_id="r")))
            assert head == store.head()
            assert store.commit_if_head(head, _rows(head, command(3)))
            assert store.verify().ok

    def test_rows_that_do_not_continue_the_head_are_refused(
        self, pg_url: str, command: Any
    ) -> None:
        """Rows sealed against another head than the one named are a chain error."""
        with PostgresStore(pg_url, create=True) as store:
            old = store.head()
            store.append([command(1)], at=AT, actor=ACTOR)
            with pytest.raises(ChainError, match="does not continue"):
                store.commit_if_head(store.head(), _rows(old, command(2)))
            assert 1 == store.head().seq

    @pytest.mark.parametrize(
        ("size", "how"),
        [(1, "commit_if_head"), (300, "commit_if_head"), (1, "transaction"), (300, "transaction")],
    )
    def test_rows_whose_prev_hash_is_not_the_heads_are_refused(
        self, pg_url: str, command: Any, size: int, how: str
    ) -> None:
        """The right next seq is not enough: the first row's prevHash must name the head.

        The rows are sealed against a head with the current seq and batch but
        another content hash, so only the hash check can refuse them; nothing
        is written, and the log still verifies and takes the next good write.
        """
        with PostgresStore(pg_url, create=True) as store:
            store.append([command(0)], at=AT, actor=ACTOR)
            head = store.head()
            forged = Head(seq=head.seq, content_hash="f" * 64, batch=head.batch)
            events = [command(n) for n in range(1, size + 1)]
            sealed = seal_batch(events, forged, forged.batch + 1, at=AT, actor=ACTOR, cause=None)
            rows = [(*columns(item.entry), item.body) for item in sealed]
            assert head.seq + 1 == sealed[0].entry.seq
            with pytest.raises(ChainError, match="does not continue"):
                _write(store, head, rows, how)
            assert head == store.head()
            assert store.verify().ok
            store.append([command(size + 1)], at=AT, actor=ACTOR)
            assert head.seq + 1 == store.head().seq
            assert store.verify().ok


def test_verify_names_the_seq_that_completed_a_changed_tree_node(pg_url: str, command: Any) -> None:
    """The shared log's Merkle tree is checked as the file's is: a changed node, an extra one."""
    with PostgresStore(pg_url, create=True) as store:
        store.append([command(n) for n in range(1, 33)], at=AT, actor=ACTOR)
        assert store.verify().ok
        second = merkle.stored_position(4, 1)  # leaves 16-31: completed by seq 32
        node = "SELECT hash FROM _pwf_tree WHERE pos = %s"
        change = "UPDATE _pwf_tree SET hash = %s WHERE pos = %s"
        with psycopg.connect(pg_url, autocommit=True) as connection:
            kept = connection.execute(node, (second,)).fetchone()
            assert kept is not None
            connection.execute(change, (bytes(32), second))
        report = store.verify()
        said = f"the Merkle tree's node at position {second}, completed by this event,"
        assert (32, f"{said} is not the log's") == (report.first_bad_seq, report.reason)
        with psycopg.connect(pg_url, autocommit=True) as connection:
            connection.execute(change, (kept[0], second))
            connection.execute(
                "INSERT INTO _pwf_tree (pos, hash) VALUES (%s, %s)", (10**6, bytes(32))
            )
        report = store.verify()
        assert (33, "the Merkle tree holds nodes past the log's last event") == (
            report.first_bad_seq,
            report.reason,
        )


def _rows(head: Head, event: Event) -> list[tuple[object, ...]]:
    """One event sealed against ``head`` as a new batch, as rows of the log's columns."""
    sealed = seal_batch([event], head, head.batch + 1, at=AT, actor=ACTOR, cause=None)
    return [(*columns(item.entry), item.body) for item in sealed]


def _write(store: PostgresStore, head: Head, rows: list[tuple[object, ...]], how: str) -> None:
    """Write ``rows`` at ``head`` as a host ahead of the lock does, or inside a transaction."""
    if how == "commit_if_head":
        store.commit_if_head(head, rows)
        return
    with store.transaction() as tx:
        tx.write_rows(rows)


def _insert_again(store: PostgresStore, item: Sealed) -> None:
    with store.transaction() as tx:
        tx.insert_verified(item.entry, item.body)
