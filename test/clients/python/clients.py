#!/usr/bin/env python3
"""test/clients/python/clients.py: the README's Python example (psycopg 3 and
psycopg_pool, Debian's python3-psycopg and python3-psycopg-pool), run with the
driver's defaults against a server with dlock, and checked.

Run by test/clients/run:  PGHOST=127.0.0.1 PGPORT=54321 python3 clients.py
Prints "ok - python: ..." / "not ok - python: ..." lines, then
"# all python client tests ran".
"""
import datetime
import logging
import os
import sys
import time
import threading
import traceback

# README begin
import contextlib
import hashlib
from datetime import timedelta

import psycopg  # psycopg 3
import psycopg_pool
from psycopg.pq import TransactionStatus


# autocommit=True, which is not psycopg's default, for every connection
def connect(conninfo):
    return psycopg.connect(conninfo, autocommit=True)


def make_pool(conninfo, **options):
    return psycopg_pool.ConnectionPool(conninfo, kwargs={"autocommit": True}, **options)


def dlock_key(name):
    """The lock's 64-bit key, as dlock_key(name) computes it."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little", signed=True)


def _ms(duration):
    """A timedelta to whole milliseconds, rounded up as dlock rounds an interval
    (so a positive one never becomes 0, "do not wait"); None stays None."""
    return None if duration is None else -(-duration // timedelta(milliseconds=1))


def try_lock(conn, name, shared=False, lease=None):
    """A session lock, now or never; lease: a timedelta, or None."""
    return conn.execute("SELECT dlock_try_ms(%s, %s, %s)",
                        (name, shared, _ms(lease))).fetchone()[0]


def lock(conn, name, timeout):
    """A session lock, waiting up to timeout (a timedelta): None waits without limit,
    timedelta(0) not at all."""
    return conn.execute("SELECT dlock_lock_ms(%s, %s, false, NULL)",
                        (name, _ms(timeout))).fetchone()[0]


def unlock(conn, name, shared=False):
    return conn.execute("SELECT dlock_unlock(%s, %s)", (name, shared)).fetchone()[0]


def acquire(conn, name, lease, timeout=None):
    """A detached lock: its fencing token (an int), or None if it was not free in time.
    timeout: how long to wait; None or timedelta(0) tries once (unlike lock's None)."""
    return conn.execute("SELECT dlock_acquire_ms(%s, %s, %s, false)",
                        (name, _ms(lease), _ms(timeout))).fetchone()[0]


def extend(conn, name, token, lease):
    """A new lease for a detached lock, from now; returns when it ends (a datetime)."""
    return conn.execute("SELECT dlock_extend_ms(%s, %s, %s)",
                        (name, token, _ms(lease))).fetchone()[0]


def release(conn, name, token):
    return conn.execute("SELECT dlock_release(%s, %s)", (name, token)).fetchone()[0]


def in_transaction_lock(conn, name, timeout, work):
    """work(conn) in one transaction that holds the lock, released at its end.
    False if the lock was not free within timeout (None: without limit)."""
    with conn.transaction():
        if not conn.execute("SELECT dlock_lock_xact_ms(%s, %s, false, NULL)",
                            (name, _ms(timeout))).fetchone()[0]:
            return False
        work(conn)
    return True


def with_lock(pool, name, timeout, work):
    """The pooled way: lock, work(conn) and unlock on one checked-out connection."""
    with pool.connection() as conn:
        if not lock(conn, name, timeout):
            return False
        try:
            work(conn)
        finally:  # errors here are suppressed: work's own error is the one raised
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()  # else an open or failed transaction fails the unlock
            unlocked = False
            with contextlib.suppress(psycopg.Error):
                unlocked = unlock(conn, name)
            if not unlocked:
                conn.close()  # ends the session and its locks; the pool drops it
    return True
# README end


LANG = "python"
FAILED = []


def report(what, ok, detail=""):
    if ok:
        print("ok - %s: %s" % (LANG, what))
    else:
        FAILED.append(what)
        print("not ok - %s: %s%s" % (LANG, what, ": " + str(detail) if detail != "" else ""))
    sys.stdout.flush()


def conninfo():
    return "host=%s port=%s user=%s dbname=%s application_name=dlock-client-python" % (
        os.environ.get("PGHOST", "127.0.0.1"), os.environ.get("PGPORT", "5432"),
        os.environ.get("PGUSER", "postgres"), os.environ.get("PGDATABASE", "postgres"))


def count_held(conn, name):
    return conn.execute("SELECT count(*) FROM dlock_locks WHERE name = %s AND granted",
                        (name,)).fetchone()[0]


def held_after_close(conn, name):
    """count_held once a closed session has ended (its backend exits just after the close)."""
    deadline = time.monotonic() + 5
    while count_held(conn, name) and time.monotonic() < deadline:
        time.sleep(0.01)
    return count_held(conn, name)


def step(what, fn):
    try:
        res = fn()
        if res is True:
            report(what, True)
        else:
            report(what, False, res)
    except Exception as e:  # noqa: BLE001 - any failure is a failed check
        report(what, False, "".join(traceback.format_exception_only(type(e), e)).strip())


class WorkError(Exception):
    """The error a with_lock work raises in the checks."""


def main():
    # the pool's own warnings (a closed connection discarded) are expected here
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    a, b, c, watch = (connect(conninfo()) for _ in range(4))
    names = []

    def keys():
        for n in ("nightly-report", "задача-42", "n" * 200):
            server = watch.execute("SELECT dlock_key(%s)", (n,)).fetchone()[0]
            if dlock_key(n) != server:
                return "%r: %d, the server says %d" % (n, dlock_key(n), server)
        return True
    step("the key is SHA-256 computed here", keys)

    def rounding():
        if _ms(None) is not None:
            return "_ms(None) is %r" % (_ms(None),)
        for d in (timedelta(0), timedelta(microseconds=1), timedelta(microseconds=999),
                  timedelta(milliseconds=200), timedelta(seconds=1.1),
                  timedelta(microseconds=1500500), timedelta(days=24)):
            server = watch.execute("SELECT ceil(extract(epoch FROM %s::interval) * 1000)::bigint",
                                   (d,)).fetchone()[0]
            if _ms(d) != server:
                return "%r: %r, dlock's rounding up gives %r" % (d, _ms(d), server)
        return True
    step("durations to milliseconds round up as the server does (1 us is 1 ms)", rounding)

    def contention():
        n = "c-python"
        names.append(n)
        if try_lock(a, n, False, timedelta(seconds=30)) is not True:
            return "A did not get it"
        if try_lock(b, n) is not False:
            return "B got it too"
        t0 = time.monotonic()
        got = lock(b, n, timedelta(milliseconds=200))
        waited = time.monotonic() - t0
        if got is not False or waited < 0.15:
            return "lock with a 200 ms timeout: %r after %.3f s" % (got, waited)
        if unlock(a, n) is not True:
            return "unlock on A"
        if lock(b, n, timedelta(seconds=5)) is not True:
            return "B did not get it once free"
        return unlock(b, n) is True or "unlock on B"
    step("contention: try, a 200 ms timeout, then the lock once free", contention)

    def no_limit():
        n = "c-python"
        if try_lock(a, n) is not True:
            return "A did not get it"
        timer = threading.Timer(0.4, unlock, (a, n))
        timer.start()
        t0 = time.monotonic()
        got = lock(b, n, None)
        waited = time.monotonic() - t0
        timer.join()
        if got is not True or waited < 0.3:
            return "lock(timeout=None): %r after %.3f s" % (got, waited)
        return unlock(b, n) is True or "unlock on B"
    step("lock with timeout None waits without limit (until A unlocks 0.4 s later)", no_limit)

    def lease():
        n = "lease-python"
        names.append(n)
        try_lock(a, n, lease=timedelta(seconds=30))
        secs = watch.execute("SELECT extract(epoch FROM lease_expires - since)::float8 FROM dlock_locks"
                             " WHERE name = %s", (n,)).fetchone()[0]
        unlock(a, n)
        return 29 <= secs <= 31 or "lease of %r s" % secs
    step("a lease given as a timedelta", lease)

    def shared():
        n = "s-python"
        names.append(n)
        got = (try_lock(a, n, True), try_lock(b, n, True), try_lock(c, n, False))
        if got != (True, True, False):
            return "shared, shared, exclusive: %r" % (got,)
        return (unlock(a, n, True), unlock(b, n, True)) == (True, True) or "unlock shared"
    step("shared with Python's True and False", shared)

    def detached():
        n = "d-python"
        names.append(n)
        token = acquire(a, n, timedelta(seconds=60))
        if type(token) is not int or token <= 10**13:
            return "token %r (%s)" % (token, type(token).__name__)
        view = watch.execute("SELECT token::text FROM dlock_locks WHERE name = %s", (n,)).fetchone()[0]
        if str(token) != view:
            return "token %d, the view says %s" % (token, view)
        t0 = time.monotonic()
        if acquire(b, n, timedelta(seconds=1)) is not None or time.monotonic() - t0 > 0.1:
            return "acquire with the default timeout (None) did not return None at once"
        t0 = time.monotonic()
        if acquire(b, n, timedelta(seconds=1), timedelta(milliseconds=300)) is not None or \
                time.monotonic() - t0 < 0.25:
            return "acquire with a 300 ms timeout"
        until = extend(b, n, token, timedelta(seconds=120))
        now = datetime.datetime.now(datetime.timezone.utc)
        if not isinstance(until, datetime.datetime) or until < now + timedelta(seconds=100):
            return "extended until %r" % (until,)
        if release(b, n, token) is not True:
            return "release from another connection"
        return release(b, n, token) is False or "released twice"
    step("detached: token as int, None at once when busy (timeout None), extend and release"
         " from another connection", detached)

    def xact():
        n = "x-python"
        names.append(n)
        seen = []
        ok = in_transaction_lock(a, n, timedelta(seconds=1), lambda conn: seen.append(try_lock(b, n)))
        if ok is not True or seen != [False]:
            return "in the transaction: %r, B's try: %r" % (ok, seen)
        if try_lock(b, n) is not True:
            return "still held after the commit"
        return unlock(b, n) is True or "unlock"
    step("a transaction lock inside conn.transaction()", xact)

    def interval_args():
        n = "i-python"
        names.append(n)
        sql = "SELECT dlock_try(%s, lease => %s)"
        if a.execute(sql, (n, timedelta(seconds=30))).fetchone()[0] is not True:
            return "lease => timedelta"
        secs = watch.execute("SELECT extract(epoch FROM lease_expires - since)::float8 FROM dlock_locks"
                             " WHERE name = %s", (n,)).fetchone()[0]
        unlock(a, n)
        if not 29 <= secs <= 31:
            return "lease => timedelta(seconds=30) gave %r s" % secs
        if a.execute(sql, (n, "30 s")).fetchone()[0] is not True:
            return "lease => '30 s' (a str, sent untyped)"
        unlock(a, n)
        try:
            a.execute(sql, (n, 30))
            return "lease => 30 (an int) was accepted"
        except psycopg.Error as e:
            return e.sqlstate == "42883" or "lease => 30 (an int): %s %s" % (e.sqlstate, e)
    step("interval arguments: a timedelta and a str work, an int is 42883", interval_args)

    def default_autocommit():
        n = "ac-python"
        names.append(n)
        d = psycopg.connect(conninfo())  # psycopg's default: autocommit=False
        try:
            if d.autocommit is not False:
                return "the default autocommit is %r" % d.autocommit
            try_lock(d, n)
            if d.info.transaction_status != TransactionStatus.INTRANS:
                return "after a try_lock: %r, not INTRANS" % d.info.transaction_status
            d.rollback()
            if count_held(watch, n) != 1:
                return "the session lock did not survive the rollback"
            if unlock(d, n) is not True:
                return "unlock"
            d.rollback()
            token = acquire(d, n, timedelta(seconds=60))
            if count_held(watch, n) != 1:
                return "the detached lock is not held before the commit"
            d.rollback()
            # the undo never waits: the lock holder releases it as soon as it
            # runs (doc/detached.md), on a busy machine a moment later
            deadline = time.monotonic() + 5
            while count_held(watch, n) != 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            if count_held(watch, n) != 0:
                return "the rollback did not undo the acquire within 5 s (token %r)" % token
            d.execute("SELECT 1")  # any statement: the transaction is open
            if in_transaction_lock(d, n, timedelta(seconds=1), lambda conn: None) is not True:
                return "in_transaction_lock"
            if try_lock(b, n) is not False:
                return "the transaction lock was gone after conn.transaction() (a savepoint) ended"
            d.commit()
            if try_lock(b, n) is not True:
                return "the transaction lock was still held after commit()"
            unlock(b, n)
            # with no statement before it, conn.transaction() is the transaction and commits
            if in_transaction_lock(d, n, timedelta(seconds=1), lambda conn: None) is not True:
                return "in_transaction_lock on an idle connection"
            if d.info.transaction_status != TransactionStatus.IDLE or count_held(watch, n) != 0:
                return "conn.transaction() on an idle connection did not end the transaction"
            try_lock(d, n)
        finally:
            d.close()
        return held_after_close(watch, n) == 0 or "a session lock outlived close()"
    step("psycopg's default autocommit=False: the first statement opens a transaction; a session"
         " lock survives its rollback, an acquire does not; a transaction lock taken after"
         " another statement lasts until commit(); close() ends the session lock", default_autocommit)

    def pooled():
        n = "p-python"
        names.append(n)
        seen = []
        with make_pool(conninfo(), min_size=1, max_size=2) as pool:
            ok = with_lock(pool, n, timedelta(seconds=1),
                           lambda conn: seen.append((count_held(watch, n), conn.autocommit)))
            if ok is not True or seen != [(1, True)]:
                return "with_lock: %r, (held, autocommit) %r" % (ok, seen)
            if count_held(watch, n) != 0:
                return "still held after with_lock"
            if try_lock(b, n) is not True:
                return "B could not take it"
            if with_lock(pool, n, timedelta(milliseconds=50), lambda conn: seen.append("ran")) is not False:
                return "with_lock while B holds it"
            unlock(b, n)
            with pool.connection() as conn:
                token = acquire(conn, n, timedelta(seconds=60))
            with pool.connection() as conn:
                if release(conn, n, token) is not True:
                    return "detached release through the pool"
        return seen == [(1, True)] or "the work ran without the lock"
    step("a pool (autocommit): with_lock; false when busy; detached through the pool", pooled)

    def with_lock_failures():
        n = "f-python"
        names.append(n)
        pids = []

        def raises(conn):
            pids.append(conn.info.backend_pid)
            raise WorkError("work failed")

        def fails_in_transaction(conn):
            conn.execute("BEGIN")
            with contextlib.suppress(psycopg.errors.DivisionByZero):
                conn.execute("SELECT 1/0")

        def fails_in_transaction_and_raises(conn):
            conn.execute("BEGIN")
            conn.execute("SELECT 1/0")

        def unlock_will_fail(conn):
            pids.append(conn.info.backend_pid)
            conn.execute("SET search_path TO nowhere")  # dlock_unlock: 42883
            raise WorkError("work failed")

        problems = []
        with make_pool(conninfo(), min_size=1, max_size=1) as pool:
            for work, expected in ((raises, WorkError), (fails_in_transaction, None),
                                   (fails_in_transaction_and_raises, psycopg.errors.DivisionByZero),
                                   (unlock_will_fail, WorkError)):
                try:
                    got = with_lock(pool, n, timedelta(seconds=1), work)
                    if expected is not None or got is not True:
                        problems.append("%s: returned %r" % (work.__name__, got))
                except Exception as e:  # noqa: BLE001
                    if expected is None or type(e) is not expected:
                        problems.append("%s: raised %s: %s" % (work.__name__, type(e).__name__, e))
                if held_after_close(watch, n) != 0:
                    problems.append("%s: still held" % work.__name__)
                    watch.execute("SELECT pg_terminate_backend(pid) FROM dlock_locks WHERE name = %s",
                                  (n,))
            with pool.connection() as conn:
                pids.append(conn.info.backend_pid)
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    problems.append("the pooled connection is not idle")
        if len(pids) == 3 and pids[0] != pids[1]:
            problems.append("the connection changed after a work that raised")
        if len(pids) == 3 and pids[1] == pids[2]:
            problems.append("the connection whose unlock failed went back to the pool")
        # the same with psycopg's default (autocommit off): the work fails inside the implicit transaction
        with psycopg_pool.ConnectionPool(conninfo(), min_size=1, max_size=1) as pool:
            def fails(conn):
                with contextlib.suppress(psycopg.errors.DivisionByZero):
                    conn.execute("SELECT 1/0")
            try:
                if with_lock(pool, n, timedelta(seconds=1), fails) is not True:
                    problems.append("autocommit off: with_lock did not return True")
            except Exception as e:  # noqa: BLE001
                problems.append("autocommit off: raised %s: %s" % (type(e).__name__, e))
            if count_held(watch, n) != 0:
                problems.append("autocommit off: still held")
        return not problems or "; ".join(problems)
    step("with_lock when the work raises, leaves a failed transaction (and raises), or breaks the"
         " unlock: the work's error propagates, nothing stays held, a connection whose unlock"
         " failed is dropped", with_lock_failures)

    def wrong_way():
        n = "w-python"
        names.append(n)
        with make_pool(conninfo(), min_size=2, max_size=2) as pool:
            with pool.connection() as first, pool.connection() as second:
                if try_lock(first, n) is not True:
                    return "try_lock on the first pooled connection"
                if unlock(second, n) is not False:
                    return "unlock on the second pooled connection was not False"
            if count_held(watch, n) != 1:
                return "not held after the unlock through the other connection"
        return held_after_close(watch, n) == 0 or "still held after the pool was closed"
    step("the wrong way: locked on one pooled connection, unlocked on another: False, still held"
         " (until the pool is closed)", wrong_way)

    def lost_lease():
        n = "lost-python"
        names.append(n)
        conn = connect(conninfo())
        conn.execute("SELECT dlock_try_ms(%s, false, 200)", (n,))
        deadline = time.monotonic() + 10
        while count_held(watch, n) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            conn.execute("SELECT 1")
            return "the session lived past its lease"
        except psycopg.OperationalError as e:
            print("#   python: %s: %s" % (type(e).__name__, str(e).replace("\n", " | ")))
            if 'terminating connection because the lease of lock "%s" ran out' % n not in str(e):
                return "psycopg 3 said %r" % str(e)
            return True
        finally:
            conn.close()
    step("a session ended over its lease, used again: psycopg 3 raises OperationalError whose"
         " text has the server's FATAL (the lease of lock ... ran out); e.sqlstate is None", lost_lease)

    step("nothing left held", lambda: watch.execute(
        "SELECT count(*) FROM dlock_locks WHERE name = ANY(%s)", (names,)).fetchone()[0] == 0 or "held")
    for conn in (a, b, c, watch):
        conn.close()
    print("# all %s client tests ran" % LANG)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
