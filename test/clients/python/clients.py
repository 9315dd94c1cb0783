#!/usr/bin/env python3
"""test/clients/python/clients.py: the README's Python example (psycopg 3 and
psycopg_pool, Debian's python3-psycopg and python3-psycopg-pool), run with the
driver's defaults against a server with dlock, and checked.

Run by test/clients/run:  PGHOST=127.0.0.1 PGPORT=54321 python3 clients.py
Prints "ok - python: ..." / "not ok - python: ..." lines, then
"# all python client tests ran".
"""
import datetime
import os
import sys
import time
import traceback

import psycopg
import psycopg_pool

# README begin
import hashlib
from datetime import timedelta


def dlock_key(name):
    """The lock's 64-bit key, as dlock_key(name) computes it."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little", signed=True)


def try_lock(conn, name, shared=False, lease=None):
    """A session lock, now or never; lease: a timedelta, or None."""
    lease_ms = None if lease is None else int(lease / timedelta(milliseconds=1))
    return conn.execute("SELECT dlock_try(%s, shared => %s, lease_ms => %s)",
                        (name, shared, lease_ms)).fetchone()[0]


def lock(conn, name, timeout):
    """A session lock, waiting up to timeout (a timedelta) in the queue."""
    timeout_ms = int(timeout / timedelta(milliseconds=1))
    return conn.execute("SELECT dlock_lock(%s, timeout_ms => %s)", (name, timeout_ms)).fetchone()[0]


def unlock(conn, name, shared=False):
    return conn.execute("SELECT dlock_unlock(%s, shared => %s)", (name, shared)).fetchone()[0]


def acquire(conn, name, lease, timeout=timedelta(0)):
    """A detached lock: its fencing token (an int), or None if it was not free in time."""
    return conn.execute("SELECT dlock_acquire(%s, lease_ms => %s, timeout_ms => %s)",
                        (name, lease // timedelta(milliseconds=1),
                         timeout // timedelta(milliseconds=1))).fetchone()[0]


def extend(conn, name, token, lease):
    """A new lease for a detached lock, from now; returns when it ends (a datetime)."""
    return conn.execute("SELECT dlock_extend(%s, %s, lease_ms => %s)",
                        (name, token, lease // timedelta(milliseconds=1))).fetchone()[0]


def release(conn, name, token):
    return conn.execute("SELECT dlock_release(%s, %s)", (name, token)).fetchone()[0]


def in_transaction_lock(conn, name, timeout, work):
    """work() inside one transaction that holds the lock; it is released at the commit
    (or rollback). False if the lock was not free within timeout. Connect with
    autocommit=True: with psycopg's default, the first statement opens a transaction
    that stays open, conn.transaction() inside it is only a savepoint, and the lock is
    kept until that outer transaction ends."""
    with conn.transaction():
        if not conn.execute("SELECT dlock_lock_xact(%s, timeout_ms => %s)",
                            (name, timeout // timedelta(milliseconds=1))).fetchone()[0]:
            return False
        work(conn)
    return True


def with_lock(pool, name, timeout, work):
    """The pooled way: lock and unlock on the same connection, checked out for the
    whole time. (A session lock taken on one pooled connection and unlocked through
    another stays held until the first one closes.)"""
    with pool.connection() as conn:
        if not lock(conn, name, timeout):
            return False
        try:
            work(conn)
        finally:
            unlock(conn, name)
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


def connect():
    # autocommit, as the README says (conn.transaction() is then a transaction)
    return psycopg.connect(conninfo(), autocommit=True)


def count_held(conn, name):
    return conn.execute("SELECT count(*) FROM dlock_locks WHERE name = %s AND granted",
                        (name,)).fetchone()[0]


def step(what, fn):
    try:
        res = fn()
        if res is True:
            report(what, True)
        else:
            report(what, False, res)
    except Exception as e:  # noqa: BLE001 - any failure is a failed check
        report(what, False, "".join(traceback.format_exception_only(type(e), e)).strip())


def main():
    a, b, c, watch = connect(), connect(), connect(), connect()
    names = []

    def keys():
        for n in ("nightly-report", "задача-42", "n" * 200):
            server = watch.execute("SELECT dlock_key(%s)", (n,)).fetchone()[0]
            if dlock_key(n) != server:
                return "%r: %d, the server says %d" % (n, dlock_key(n), server)
        return True
    step("the key is SHA-256 computed here", keys)

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
        if acquire(b, n, timedelta(seconds=1)) is not None:
            return "acquired twice"
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
    step("detached: token as int, None when busy, extend and release from another connection", detached)

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

    def pooled():
        n = "p-python"
        names.append(n)
        seen = []
        with psycopg_pool.ConnectionPool(conninfo(), min_size=1, max_size=2, open=True,
                                         kwargs={"autocommit": True}) as pool:
            ok = with_lock(pool, n, timedelta(seconds=1), lambda conn: seen.append(count_held(watch, n)))
            if ok is not True or seen != [1]:
                return "with_lock: %r, held by %r" % (ok, seen)
            if count_held(watch, n) != 0:
                return "still held after with_lock"
            with pool.connection() as conn:
                token = acquire(conn, n, timedelta(seconds=60))
            with pool.connection() as conn:
                if release(conn, n, token) is not True:
                    return "detached release through the pool"
        return True
    step("a pool: one connection for lock and unlock; detached through the pool", pooled)

    step("nothing left held", lambda: watch.execute(
        "SELECT count(*) FROM dlock_locks WHERE name = ANY(%s)", (names,)).fetchone()[0] == 0 or "held")
    for conn in (a, b, c, watch):
        conn.close()
    print("# all %s client tests ran" % LANG)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
