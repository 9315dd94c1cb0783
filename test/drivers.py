#!/usr/bin/env python3
"""test/drivers.py: detached locks from a second driver, psycopg 3 (Debian's
python3-psycopg), directly and behind pgbouncer.

Run by test/run with the pooler suite, against its scratch cluster (dlock
preloaded):
    python3 test/drivers.py --port 54321
It starts pgbouncer as test/pooler.py does (port PORT + 3, the "txn" pool:
transaction mode over several server connections) and prints "ok - name" /
"not ok - name" lines, then "# all driver tests ran".  It creates (and drops)
the role dlock_drv_other.

psycopg 3 binds parameters on the server (extended protocol) and, with
prepare_threshold=0, prepares every statement; behind pgbouncer in
transaction mode (1.18 on Debian 12) prepared statements do not work, so
there it runs with prepare_threshold=None.  What the checks show:
  - tokens come back as Python int, expiries as aware datetimes, a lock not
    acquired as None; parameters bind as str, int and timedelta, in text and
    binary, through prepared statements with custom and generic plans;
  - dlock's errors reach the driver as the documented SQLSTATEs (psycopg's
    exception classes), its WARNINGs through the notice handler;
  - with autocommit off (psycopg's default) an acquisition counts only once
    committed; in pipeline mode the statements up to a Sync are one
    transaction, so an error before the Sync undoes an acquisition whose
    token the client has already read.
"""
import argparse
import datetime
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402 - the helpers, once the path is set
import pooler  # noqa: E402
from fault import check, expect, RESULTS  # noqa: E402

try:
    import psycopg
    import psycopg.errors
except ImportError:  # reported as a failed check in main()
    psycopg = None

SEC = datetime.timedelta(seconds=1)


def connect3(prepare_threshold=0, autocommit=True, app="dlock-psycopg3", user="postgres"):
    """A psycopg 3 connection to the server itself."""
    return psycopg.connect(host="/tmp/dlock-%d" % fault.ARGS.port, port=fault.ARGS.port, user=user,
                           dbname="postgres", application_name=app, autocommit=autocommit,
                           prepare_threshold=prepare_threshold)


def bouncer3(autocommit=True, app="dlock-psycopg3-pooled"):
    """A psycopg 3 connection through pgbouncer's "txn" pool (transaction
    mode): no prepared statements there."""
    return psycopg.connect(host="/tmp/dlock-%d" % fault.ARGS.port, port=pooler.bouncer_port(), user="postgres",
                           dbname="txn", application_name=app, autocommit=autocommit, prepare_threshold=None)


def one(conn, sql, params=None, binary=False):
    """The first column of the first row, or None."""
    cur = conn.cursor(binary=binary)
    cur.execute(sql, params)
    row = cur.fetchone() if cur.description else None
    return row[0] if row else None


def expect_error(conn, sql, params, cls, what):
    try:
        one(conn, sql, params)
    except psycopg.Error as e:
        expect(isinstance(e, cls), "%s: %s (SQLSTATE %s), not %s (%s)"
               % (what, type(e).__name__, e.sqlstate, cls.__name__, cls.sqlstate))
        return e
    raise AssertionError("%s: no error (%s expected)" % (what, cls.__name__))


class Notices:
    """The notices a connection receives (psycopg 3 has no conn.notices).
    A Diagnostic is readable only inside the handler: keep its fields."""

    def __init__(self, conn):
        self.got = []
        conn.add_notice_handler(lambda d: self.got.append((d.severity_nonlocalized, d.message_primary)))

    def warnings(self):
        out = [msg for sev, msg in self.got if sev == "WARNING"]
        del self.got[:]
        return out


def token_in_view(conn, name):
    return one(conn, "SELECT token FROM dlock_locks WHERE name = %s AND granted AND scope = 'detached'", (name,))


def expect_free(conn, name):
    expect(token_in_view(conn, name) is None, "%r still held" % name)
    tok = one(conn, "SELECT dlock_acquire(%s, %s)", (name, 30 * SEC))
    expect(tok is not None, "%r not free" % name)
    expect(one(conn, "SELECT dlock_release(%s, %s)", (name, tok)) is True, "release of %r" % name)
    return tok


@check("psycopg 3, prepared statements (prepare_threshold=0), custom and generic plans: acquire, extend, release")
def t_prepared():
    c = connect3(prepare_threshold=0)
    other = connect3(prepare_threshold=0)
    notices = Notices(c)
    prev = 0
    rounds = 8
    for i in range(rounds):
        if i == rounds // 2:
            c.execute("SET plan_cache_mode = force_generic_plan")
        tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-job", 30 * SEC))
        expect(type(tok) is int and tok > prev, "round %d: token %r after %r" % (i, tok, prev))
        expect(one(other, "SELECT dlock_acquire(%s, %s)", ("drv-job", 30 * SEC)) is None,
               "round %d: another session got it" % i)
        exp = one(c, "SELECT dlock_extend(%s, %s, %s)", ("drv-job", tok, 60 * SEC))
        expect(isinstance(exp, datetime.datetime) and exp.tzinfo is not None, "round %d: expiry %r" % (i, exp))
        left = (exp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        expect(55 < left <= 61, "round %d: %.1f s left after extending by 1 min" % (i, left))
        expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-job", tok)) is True, "round %d: release" % i)
        expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-job", tok)) is False, "round %d: second release" % i)
        expect(len(notices.warnings()) == 1, "round %d: no WARNING from the second release" % i)
        prev = tok
    # every call above ran as a prepared statement, the later ones with a generic plan
    stmts = c.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
                      "WHERE NOT from_sql").fetchall()
    for call, runs in (("dlock_acquire($1, $2)", rounds), ("dlock_extend($1, $2, $3)", rounds),
                       ("dlock_release($1, $2)", 2 * rounds)):
        found = [(g, cu) for s, g, cu in stmts if ("SELECT " + call) in s]
        expect(len(found) == 1, "prepared statements for %s: %r (all: %r)" % (call, found, stmts))
        g, cu = found[0]
        expect(g + cu == runs and g >= rounds // 2, "%s: %d generic and %d custom plans" % (call, g, cu))
    c.close()
    other.close()


@check("psycopg 3, binary parameters and results: bigint token, timestamptz, boolean, NULL")
def t_binary():
    c = connect3(prepare_threshold=None)
    tok = one(c, "SELECT dlock_acquire(%b, %b)", ("drv-binary", 30 * SEC), binary=True)
    expect(type(tok) is int and tok > 0, "token %r" % (tok,))
    expect(one(c, "SELECT dlock_acquire(%b, %b)", ("drv-binary", 30 * SEC), binary=True) is None,
           "a second acquisition is not None")
    exp = one(c, "SELECT dlock_extend(%b, %b, %b)", ("drv-binary", tok, 60 * SEC), binary=True)
    expect(isinstance(exp, datetime.datetime) and exp.tzinfo is not None, "expiry %r" % (exp,))
    expect(token_in_view(c, "drv-binary") == tok, "the view's token")
    expect(one(c, "SELECT dlock_acquire(%s, %s, shared => %s)", ("drv-binary", 30 * SEC, True)) is None,
           "shared beside exclusive")
    # named arguments, shared mode and timeout bound too
    s1 = one(c, "SELECT dlock_acquire(name => %b, lease => %b, timeout => %b, shared => %b)",
             ("drv-shared", 30 * SEC, datetime.timedelta(0), True), binary=True)
    s2 = one(c, "SELECT dlock_acquire(name => %s, lease => %s, shared => %s)", ("drv-shared", 30 * SEC, True))
    expect(type(s1) is int and type(s2) is int and s2 > s1, "shared tokens %r, %r" % (s1, s2))
    expect(one(c, "SELECT dlock_acquire(%s, %s)", ("drv-shared", 30 * SEC)) is None, "exclusive beside shared")
    for name, t in (("drv-binary", tok), ("drv-shared", s1), ("drv-shared", s2)):
        expect(one(c, "SELECT dlock_release(%b, %b)", (name, t), binary=True) is True, "release %s %r" % (name, t))
    expect_free(c, "drv-shared")
    c.close()


@check("psycopg 3, errors: dlock's SQLSTATEs arrive as psycopg's exception classes, WARNINGs as notices")
def t_errors():
    c = connect3(prepare_threshold=0)
    notices = Notices(c)
    E = psycopg.errors
    expect_error(c, "SELECT dlock_acquire(%s, %s)", ("drv-err", None), E.NullValueNotAllowed, "NULL lease")
    expect_error(c, "SELECT dlock_acquire(%s, %s)", (None, 30 * SEC), E.NullValueNotAllowed, "NULL name")
    expect_error(c, "SELECT dlock_acquire(%s, %s)", ("drv-err", datetime.timedelta(milliseconds=10)),
                 E.InvalidParameterValue, "a lease below 100 ms")
    expect_error(c, "SELECT dlock_acquire(%s, %s)", ("drv-err", datetime.timedelta(days=2)),
                 E.InvalidParameterValue, "a lease above 1 day")
    expect_error(c, "SELECT dlock_acquire(%s, %s, %s)", ("drv-err", 30 * SEC, -SEC),
                 E.InvalidParameterValue, "a negative timeout")
    expect(token_in_view(c, "drv-err") is None, "an error left a lock behind")
    tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-err", 30 * SEC))
    expect_error(c, "SELECT dlock_extend(%s, %s, %s)", ("drv-err", tok + 1, 30 * SEC),
                 E.ObjectNotInPrerequisiteState, "extend with a wrong token")
    expect_error(c, "SELECT dlock_extend(%s, %s, %s)", ("drv-err", tok, None), E.NullValueNotAllowed,
                 "extend with a NULL lease")
    # another role: SET ROLE on the same connection
    c.execute("DROP ROLE IF EXISTS dlock_drv_other")
    c.execute("CREATE ROLE dlock_drv_other NOSUPERUSER")
    try:
        c.execute("SET ROLE dlock_drv_other")
        expect_error(c, "SELECT dlock_extend(%s, %s, %s)", ("drv-err", tok, 30 * SEC),
                     E.InsufficientPrivilege, "extend by another role")
        notices.warnings()
        expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-err", tok)) is False, "release by another role")
        expect(len(notices.warnings()) == 1, "no WARNING from another role's release")
        c.execute("RESET ROLE")
        expect(token_in_view(c, "drv-err") == tok, "the lock after another role's calls")
    finally:
        c.execute("RESET ROLE")
        c.execute("DROP ROLE IF EXISTS dlock_drv_other")
    expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-err", tok)) is True, "release")
    # a lease that ran out: 55P03, LockNotAvailable
    tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-short", SEC))
    expect(fault.wait_until(lambda: token_in_view(c, "drv-short") is None, timeout=10), "the lease was not enforced")
    expect_error(c, "SELECT dlock_extend(%s, %s, %s)", ("drv-short", tok, 30 * SEC), E.LockNotAvailable,
                 "extend after the lease ran out")
    notices.warnings()
    expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-short", tok)) is False, "release after the lease ran out")
    expect(len(notices.warnings()) == 1, "no WARNING from the release after the lease ran out")
    expect(one(c, "SELECT 1") == 1, "the connection is usable after the errors")
    c.close()


@check("psycopg 3, a lease that ran out: a session ended over it, busy or idle, is told so (57L01 in the text, "
       "the lock's name); a cancelled statement gets 57L02; psycopg2 shows only that the server closed")
def t_lost_lease():
    E = psycopg.errors
    expect_text = 'terminating connection because the lease of lock "%s" ran out'
    obs = connect3()
    for name, busy in (("drv-lost-busy", True), ("drv-lost-idle", False)):
        c = connect3()
        c.execute("SELECT dlock_try(%s, lease => %s)", (name, SEC / 5))
        try:
            if busy:
                c.execute("SELECT pg_sleep(5)")
            else:
                expect(fault.wait_until(lambda: one(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s",
                                                    (name,)) == 0, timeout=10), "the lease was not enforced")
                c.execute("SELECT 1")
            expect(False, "%s: the session lived past its lease" % name)
        except psycopg.OperationalError as e:
            # a FATAL reaches psycopg as the connection's error: its text, no sqlstate
            expect(expect_text % name in str(e) and "The lease ran out at " in str(e),
                   "%s: psycopg 3 said %r" % (name, str(e)))
        c.close()
    # a transaction lock's lease: the statement is cancelled, the session lives
    c = connect3(autocommit=False)
    c.execute("SELECT dlock_try_xact(%s, lease => %s)", ("drv-lost-xact", SEC / 5))
    try:
        c.execute("SELECT pg_sleep(5)")
        expect(False, "the statement ran past the transaction lock's lease")
    except psycopg.OperationalError as e:
        expect(e.sqlstate == "57L02" and not isinstance(e, E.QueryCanceled) and
               e.diag.message_primary == 'canceling statement because the lease of lock "drv-lost-xact" ran out',
               "the cancel said %s %r" % (e.sqlstate, str(e)))
    c.rollback()
    expect(one(c, "SELECT 1") == 1, "the session lives on after its statement was cancelled")
    c.close()

    def cancel_report(name, setup, statement, encoding=None):
        # the error of statement, run after setup, on a connection whose lease runs out
        c = connect3(autocommit=False)
        if encoding:
            c.execute("SET client_encoding = %s" % encoding)
        for sql in setup:
            c.execute(sql, (name,) if "%s" in sql else None)
        try:
            c.execute(statement)
            return "no error"
        except psycopg.Error as e:
            return "%s %s" % (e.sqlstate, e.diag.message_primary)
        finally:
            c.close()
    # the cancel reaches a PL/pgSQL block that catches something else and goes on up
    said = cancel_report("drv-lost-plpgsql", [],
                         "DO $$ BEGIN PERFORM dlock_try_xact('drv-lost-plpgsql', lease => '200ms'); "
                         "PERFORM pg_sleep(5); EXCEPTION WHEN division_by_zero THEN NULL; END $$")
    expect(said == '57L02 canceling statement because the lease of lock "drv-lost-plpgsql" ran out',
           "cancelled inside a block with an EXCEPTION clause: %s" % said)
    # the name held at session level (released behind dlock's back) and in the transaction
    said = cancel_report("drv-lost-both", ["SELECT dlock_try(%s, lease => '1 hour')", "SELECT pg_advisory_unlock_all()",
                                           "SELECT dlock_try_xact(%s, lease => '200ms')"], "SELECT pg_sleep(5)")
    expect(said == '57L02 canceling statement because the lease of lock "drv-lost-both" ran out',
           "a transaction hold beside a session hold released behind dlock's back: %s" % said)
    # a name the client's encoding cannot show is escaped, not an encoding error (22P05)
    said = cancel_report(None, ["SELECT dlock_try_xact('drv-lost-' || chr(26085), lease => '200ms')"],
                         "SELECT pg_sleep(5)", encoding="LATIN1")
    expect(said == '57L02 canceling statement because the lease of lock "drv-lost-\\xe6\\x97\\xa5" ran out',
           "a name LATIN1 cannot show: %s" % said)
    # never a lie: a session whose leased hold went behind dlock's back, then terminated by a DBA
    c = connect3(autocommit=False)
    c.execute("SELECT dlock_try('drv-not-lost', lease => '200ms')")
    c.execute("SELECT pg_advisory_unlock_all()")
    pid = c.info.backend_pid
    stopper = connect3()
    try:
        threading.Timer(1.0, lambda: stopper.execute("SELECT pg_terminate_backend(%s)", (pid,))).start()
        c.execute("SELECT pg_sleep(5)")
        expect(False, "the session lived on")
    except psycopg.OperationalError as e:
        expect("terminating connection due to administrator command" in str(e) and "lease" not in str(e),
               "a DBA's terminate after the hold went behind dlock's back said %r" % str(e))
    time.sleep(0.2)
    stopper.close()
    c.close()
    # psycopg2 (what test/fault.py uses) drops the FATAL's text
    c2 = fault.connect()
    fault.q(c2, "SELECT dlock_try('drv-lost-pg2', lease => '200ms')")
    try:
        fault.q(c2, "SELECT pg_sleep(5)")
        expect(False, "psycopg2's session lived past its lease")
    except fault.psycopg2.OperationalError as e:
        expect("server closed the connection unexpectedly" in str(e), "psycopg2 said %r" % str(e))
    obs.close()


@check("psycopg 3 through pgbouncer (transaction pooling, prepare_threshold=None): acquire on one client, "
       "extend and release on another, many times")
def t_pooled():
    a, b = bouncer3(app="drv-a"), bouncer3(app="drv-b")
    prev = 0
    for i in range(10):
        x, y = (a, b) if i % 2 == 0 else (b, a)
        tok = one(x, "SELECT dlock_acquire(%s, %s)", ("drv-pooled", 30 * SEC))
        expect(type(tok) is int and tok > prev, "round %d: token %r after %r" % (i, tok, prev))
        expect(one(y, "SELECT dlock_acquire(%s, %s)", ("drv-pooled", 30 * SEC)) is None,
               "round %d: the other client got it" % i)
        exp = one(y, "SELECT dlock_extend(%s, %s, %s)", ("drv-pooled", tok, 60 * SEC))
        expect(isinstance(exp, datetime.datetime), "round %d: expiry %r" % (i, exp))
        expect(one(y, "SELECT dlock_release(%s, %s)", ("drv-pooled", tok)) is True, "round %d: release" % i)
        prev = tok
    # the client that acquired is gone before another one releases
    tok = one(a, "SELECT dlock_acquire(%s, %s)", ("drv-pooled", 30 * SEC))
    a.close()
    expect(token_in_view(b, "drv-pooled") == tok, "the lock after its client left")
    expect(one(b, "SELECT dlock_release(%s, %s)", ("drv-pooled", tok)) is True, "release after the client left")
    b.close()


@check("psycopg 3 with autocommit off (its default): an acquisition counts once committed, "
       "a rolled-back or uncommitted one is undone")
def t_transactions():
    direct = connect3(prepare_threshold=None)
    c = bouncer3(autocommit=False)
    # transaction() blocks: Rollback undoes, a normal exit commits
    with c.transaction():
        tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-tx", 30 * SEC))
        expect(tok is not None, "acquire in a transaction block")
        raise psycopg.Rollback()
    expect(c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, "not idle after the block")
    # the lock holder undoes a rolled-back acquisition at its next step
    # (doc/detached.md), not within the ROLLBACK
    expect(fault.wait_until(lambda: token_in_view(direct, "drv-tx") is None, timeout=10),
           "a rolled-back acquisition was not undone")
    expect_free(direct, "drv-tx")
    with c.transaction():
        tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-tx", 30 * SEC))
    expect(token_in_view(direct, "drv-tx") == tok, "not held after the block committed")
    expect(one(direct, "SELECT dlock_release(%s, %s)", ("drv-tx", tok)) is True, "release")
    # without a block, the statement opens a transaction that close() does not commit
    tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-tx", 30 * SEC))
    expect(tok is not None and c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS,
           "acquire outside a block: %r, status %r" % (tok, c.info.transaction_status))
    c.close()
    expect(fault.wait_until(lambda: token_in_view(direct, "drv-tx") is None, timeout=10),
           "an uncommitted acquisition outlived its client")
    expect_free(direct, "drv-tx")
    # the connection's context manager commits at its end
    with bouncer3(autocommit=False) as c:
        tok = one(c, "SELECT dlock_acquire(%s, %s)", ("drv-tx", 30 * SEC))
    expect(token_in_view(direct, "drv-tx") == tok, "not held after the connection block committed")
    expect(one(direct, "SELECT dlock_release(%s, %s)", ("drv-tx", tok)) is True, "release")
    direct.close()


@check("psycopg 3 pipeline mode through pgbouncer: statements up to a Sync are one transaction; "
       "an error before the Sync undoes an acquisition already read")
def t_pipeline():
    direct = connect3(prepare_threshold=None)
    c = bouncer3()
    with c.pipeline():
        c1 = c.execute("SELECT dlock_acquire(%s, %s)", ("drv-pipe", 30 * SEC))
        c2 = c.execute("SELECT scope FROM dlock_locks WHERE name = %s AND granted", ("drv-pipe",))
    tok = c1.fetchone()[0]
    expect(type(tok) is int, "token %r" % (tok,))
    expect(c2.fetchone()[0] == "detached", "the view in the same pipeline")
    with c.pipeline():
        c3 = c.execute("SELECT dlock_extend(%s, %s, %s)", ("drv-pipe", tok, 60 * SEC))
        c4 = c.execute("SELECT dlock_release(%s, %s)", ("drv-pipe", tok))
        c5 = c.execute("SELECT dlock_acquire(%s, %s)", ("drv-pipe", 30 * SEC))
    expect(isinstance(c3.fetchone()[0], datetime.datetime), "extend in a pipeline")
    expect(c4.fetchone()[0] is True, "release in a pipeline")
    tok2 = c5.fetchone()[0]
    expect(type(tok2) is int and tok2 > tok, "acquire again in the same pipeline: %r" % (tok2,))
    expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-pipe", tok2)) is True, "release")
    # the token is read (a Flush, not a Sync), then a later statement fails
    tok3 = None
    try:
        with c.pipeline():
            cur = c.execute("SELECT dlock_acquire(%s, %s)", ("drv-pipe", 30 * SEC))
            tok3 = cur.fetchone()[0]
            c.execute("SELECT 1 / 0")
        raise AssertionError("no error from the pipeline")
    except psycopg.errors.DivisionByZero:
        pass
    expect(type(tok3) is int and tok3 > tok2, "token read before the error: %r" % (tok3,))
    expect(token_in_view(direct, "drv-pipe") is None, "held after an error before the Sync")
    expect(one(direct, "SELECT dlock_release(%s, %s)", ("drv-pipe", tok3)) is False, "the undone token released")
    expect_free(direct, "drv-pipe")
    # with a Sync between them, the acquisition is committed before the error
    try:
        with c.pipeline() as p:
            cur = c.execute("SELECT dlock_acquire(%s, %s)", ("drv-pipe", 30 * SEC))
            p.sync()
            tok4 = cur.fetchone()[0]
            c.execute("SELECT 1 / 0")
        raise AssertionError("no error from the pipeline")
    except psycopg.errors.DivisionByZero:
        pass
    expect(token_in_view(direct, "drv-pipe") == tok4, "not held after a Sync and a later error")
    expect(one(c, "SELECT dlock_release(%s, %s)", ("drv-pipe", tok4)) is True, "release")
    c.close()
    direct.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    fault.ARGS = ap.parse_args()
    if psycopg is None:
        print("not ok - psycopg 3 can be imported (Debian package python3-psycopg)")
        print("# all driver tests ran")
        return 1
    print("# psycopg %s (libpq %d, %s implementation)"
          % (psycopg.__version__, psycopg.pq.version(), psycopg.pq.__impl__), flush=True)
    c = fault.connect()
    fault.q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    c.close()
    pooler.start_bouncer()
    try:
        for fn in (t_prepared, t_binary, t_errors, t_lost_lease, t_pooled, t_transactions, t_pipeline):
            fn()
    finally:
        pooler.stop_bouncer()
    print("# all driver tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
