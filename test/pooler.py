#!/usr/bin/env python3
"""test/pooler.py: dlock behind pgbouncer, from a driver (psycopg2).

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/pooler.py --port 54321
It starts its own pgbouncer (as postgres, on port PORT + 3, socket in
/tmp/dlock-PORT) with two pools of one server connection each: "tx" in
transaction mode and "sess" in session mode (server_reset_query DISCARD ALL,
pgbouncer's default), and "txn", transaction mode over several server
connections.  Prints "ok - name" / "not ok - name" lines like test/fault.py,
whose helpers it uses, then "# all pooler tests ran".

What it shows is what doc/recipes.md says about poolers: behind transaction
pooling use the *_xact functions (a session lock stays with the server
connection and the next client gets it); behind session pooling a client's
session locks go when it leaves, and dlock forgets them; and detached locks
(dlock_acquire, dlock_extend, dlock_release) belong to their token, not to a
client or server connection: taken in one transaction, they are extended and
released by another client, kept across a worker's reconnect, freed by the
server when their lease runs out, and undone when the acquiring transaction
rolls back.  It creates (and drops) the roles dlock_worker and dlock_intruder.
"""
import argparse
import datetime
import os
import socket
import subprocess
import sys
import threading
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402 - the helpers, once the path is set
from fault import check, expect, expect_error, q, pid_of, connect, close_all, RESULTS  # noqa: E402

BOUNCER = None
TXN_POOL_SIZE = 4


def bouncer_port():
    return fault.ARGS.port + 3


def via_bouncer(pool, app="dlock-pooler"):
    conn = psycopg2.connect(host="/tmp/dlock-%d" % fault.ARGS.port, port=bouncer_port(),
                            user="postgres", dbname=pool, application_name=app)
    conn.autocommit = True
    return conn


def start_bouncer():
    global BOUNCER
    d = "/tmp/dlock-%d" % fault.ARGS.port
    server = "host=%s port=%d user=postgres dbname=postgres pool_size=1" % (d, fault.ARGS.port)
    # "txn": transaction pooling over several server connections, for the
    # detached locks (a waiting call keeps one busy while others go on)
    servers = server.replace("pool_size=1", "pool_size=%d" % TXN_POOL_SIZE)
    ini = os.path.join(d, "pgbouncer.ini")
    with open(ini, "w") as f:
        f.write("[databases]\n"
                "tx = %s pool_mode=transaction\n"
                "sess = %s pool_mode=session\n"
                "txn = %s pool_mode=transaction\n"
                "[pgbouncer]\n"
                "listen_addr = 127.0.0.1\n"
                "listen_port = %d\n"
                "unix_socket_dir = %s\n"
                "auth_type = any\n"
                "pool_mode = session\n"
                "server_reset_query = DISCARD ALL\n"
                "ignore_startup_parameters = extra_float_digits\n"
                "logfile = %s/pgbouncer.log\n"
                "pidfile = %s/pgbouncer.pid\n" % (server, server, servers, bouncer_port(), d, d, d))
    # one left over from an interrupted run would hold the port
    subprocess.run(["pkill", "-f", "pgbouncer " + ini], check=False)
    time.sleep(0.2)
    BOUNCER = subprocess.Popen(["runuser", "-u", "postgres", "--", "pgbouncer", ini],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if BOUNCER.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", bouncer_port()), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("pgbouncer did not start (see %s/pgbouncer.log)" % d)


def stop_bouncer():
    if BOUNCER is not None:
        BOUNCER.terminate()
        try:
            BOUNCER.wait(10)
        except subprocess.TimeoutExpired:
            BOUNCER.kill()


@check("pgbouncer, transaction pooling: *_xact locks hold for the transaction, then the next client gets them")
def t_tx_xact():
    a = via_bouncer("tx")
    direct = connect()
    a.autocommit = False
    with a.cursor() as cur:
        cur.execute("SELECT dlock_try_xact('pooled-job', lease => '1 min')")
        expect(cur.fetchone()[0] is True, "first take")
        cur.execute("SELECT pg_backend_pid()")
        spid = cur.fetchone()[0]
    row = q(direct, "SELECT row(pid, scope, granted)::text FROM dlock_locks WHERE name = 'pooled-job'")
    expect(row == "(%d,transaction,t)" % spid, "view row %r" % row)
    expect(q(direct, "SELECT dlock_try('pooled-job')") is False, "taken while held")
    a.commit()
    b = via_bouncer("tx")
    expect(q(b, "SELECT pg_backend_pid()") == spid, "not the same server connection")
    expect(q(b, "SELECT dlock_unlock('pooled-job')") is False, "the next client inherited an xact lock")
    expect(q(direct, "SELECT count(*) FROM dlock_locks WHERE name = 'pooled-job'") == 0, "still in the view")
    expect(q(direct, "SELECT dlock_try('pooled-job')") is True, "not free after commit")
    q(direct, "SELECT dlock_unlock('pooled-job')")
    for c in (a, b, direct):
        c.close()


@check("pgbouncer, transaction pooling: a session lock stays with the server connection (use *_xact there)")
def t_tx_session_leaks():
    a = via_bouncer("tx")
    expect(q(a, "SELECT dlock_try('leaky')") is True, "take")
    spid = pid_of(a)
    a.close()
    b = via_bouncer("tx")
    expect(pid_of(b) == spid, "not the same server connection")
    expect(q(b, "SELECT dlock_token('leaky')") > 0, "the next client does not see the lock as its own")
    expect(q(b, "SELECT dlock_unlock('leaky')") is True, "the next client could not release it")
    b.close()


@check("pgbouncer, session pooling: DISCARD ALL releases a leaving client's locks; dlock forgets them")
def t_sess_discard():
    a = via_bouncer("sess")
    direct = connect()
    expect(q(a, "SELECT dlock_try('per-client', lease => '2s')") is True, "take")
    tok = q(a, "SELECT dlock_token('per-client')")
    spid = pid_of(a)
    a.close()   # pgbouncer runs DISCARD ALL on the server connection
    expect(fault.wait_until(lambda: q(direct, "SELECT count(*) FROM dlock_locks WHERE name = 'per-client'") == 0),
           "the lock outlived its client")
    b = via_bouncer("sess")
    expect(pid_of(b) == spid, "not the same server connection")
    # the next client takes the same key with a plain advisory lock, with no
    # dlock call in between; the old lease would have run out by then: the
    # reaper must leave the server connection alone (the lease marker went
    # with DISCARD ALL)
    q(b, "SELECT pg_advisory_lock(dlock_key('per-client'))")
    time.sleep(3.5)
    expect(pid_of(b) == spid, "the server connection was ended over a lease on a released lock")
    q(b, "SELECT pg_advisory_unlock(dlock_key('per-client'))")
    expect_error(psycopg2.errors.ObjectNotInPrerequisiteState, "the next client has a token for a lock it does not hold",
                 b, "SELECT dlock_token('per-client')")
    expect(q(b, "SELECT dlock_try('per-client')") is True, "take again")
    expect(q(b, "SELECT dlock_token('per-client')") > tok, "token not above the previous holder's")
    q(b, "SELECT dlock_unlock('per-client')")
    for c in (b, direct):
        c.close()


# ---- detached locks (dlock_acquire / dlock_extend / dlock_release) --------
#
# A detached lock is held by a dlock background process, not by the server
# connection that asked for it, so it is the one kind of dlock lock that works
# across clients behind transaction pooling.  These checks go through the
# "txn" pool; where it matters that the lock does not live in a server
# connection, they also end the server connection that took it.

def row_of(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def direct_as(user, tcp=False, app="dlock-pooler-direct"):
    """A connection to the server itself (not pgbouncer) as another role."""
    conn = psycopg2.connect(host="127.0.0.1" if tcp else "/tmp/dlock-%d" % fault.ARGS.port,
                            port=fault.ARGS.port, user=user, dbname="postgres", application_name=app)
    conn.autocommit = True
    return conn


def warnings_of(conn):
    return [n for n in conn.notices if n.startswith("WARNING")]


def expect_sqlstate(conn, sql, params, state, what):
    try:
        q(conn, sql, params)
    except psycopg2.Error as e:
        expect(e.pgcode == state, "%s: SQLSTATE %s (%s), not %s" % (what, e.pgcode, (e.pgerror or "").strip(), state))
        return e
    raise AssertionError("%s: no error (SQLSTATE %s expected)" % (what, state))


def detached_row(conn, name):
    """The granted detached row of name in dlock_locks, as a dict, or None."""
    with conn.cursor() as cur:
        cur.execute("SELECT scope, mode, token, pid, username, application_name, host(client_addr), "
                    "       lease_expires, extract(epoch FROM lease_expires - now())::float8, "
                    "       (SELECT backend_type FROM pg_stat_activity a WHERE a.pid = l.pid) "
                    "  FROM dlock_locks l WHERE name = %s AND granted", (name,))
        rows = cur.fetchall()
    if not rows:
        return None
    expect(len(rows) == 1, "%d granted rows for %r: %r" % (len(rows), name, rows))
    keys = ("scope", "mode", "token", "pid", "username", "application_name", "client_addr",
            "lease_expires", "lease_left", "backend_type")
    return dict(zip(keys, rows[0]))


def gone(conn, pid):
    return q(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)) == 0


def end_server_connection(direct, spid):
    """Ends a server connection of pgbouncer's and waits until it is gone
    (pgbouncer drops it from its pool when it sees the socket close)."""
    q(direct, "SELECT pg_terminate_backend(%s)", (spid,))
    expect(fault.wait_until(lambda: gone(direct, spid)), "server connection %d did not end" % spid)
    time.sleep(0.3)


def expect_free(conn, name):
    """Nobody holds name: no row in the view, and a plain advisory lock on its
    key can be taken (and is given back)."""
    expect(detached_row(conn, name) is None, "%r still in dlock_locks" % name)
    expect(q(conn, "SELECT pg_try_advisory_lock(dlock_key(%s))", (name,)) is True,
           "pg_try_advisory_lock(dlock_key(%r)) failed: not free" % name)
    expect(q(conn, "SELECT pg_advisory_unlock(dlock_key(%s))", (name,)) is True, "advisory unlock")


@check("detached, transaction pooling: acquired in one transaction, seen and released from another client")
def t_detached_other_client():
    direct = connect()
    a = via_bouncer("txn", app="dlock-detached-a")
    tok, spid = row_of(a, "SELECT dlock_acquire('job', '30s'), pg_backend_pid()")
    expect(isinstance(tok, int) and tok > 0, "token %r" % (tok,))
    a.close()
    # the server connection that ran the acquisition ends too: the lock is not in it
    end_server_connection(direct, spid)
    b = via_bouncer("txn", app="dlock-detached-b")
    r = detached_row(b, "job")
    expect(r is not None, "not in dlock_locks after the acquiring client and server connection left")
    expect(r["scope"] == "detached", "scope %r" % r["scope"])
    expect(r["mode"] == "exclusive", "mode %r" % r["mode"])
    expect(r["token"] == tok, "view token %r, acquired %r" % (r["token"], tok))
    expect(r["username"] == "postgres", "username %r" % r["username"])
    expect(r["application_name"] == "dlock-detached-a", "application_name %r" % r["application_name"])
    expect(r["lease_expires"] is not None and 25 < r["lease_left"] <= 30.5,
           "lease_expires %r (%r s left), 30 s asked" % (r["lease_expires"], r["lease_left"]))
    expect(r["pid"] != spid and r["backend_type"] not in (None, "client backend"),
           "held by pid %r (%r): not a background process" % (r["pid"], r["backend_type"]))
    expect(q(b, "SELECT dlock_acquire('job', '30s')") is None, "a second acquisition did not return NULL")
    expect(q(b, "SELECT pg_try_advisory_lock(dlock_key('job'))") is False, "pg_try_advisory_lock got it")
    expect(q(b, "SELECT pg_try_advisory_xact_lock(dlock_key('job'))") is False, "pg_try_advisory_xact_lock got it")
    expect(q(b, "SELECT dlock_try_xact('job')") is False, "dlock_try_xact got it")
    expect(q(direct, "SELECT dlock_try('job')") is False, "dlock_try got it")
    expect(q(b, "SELECT dlock_release('job', %s)", (tok,)) is True, "release from another client")
    expect_free(direct, "job")
    expect(q(direct, "SELECT dlock_try('job')") is True, "dlock_try after the release")
    expect(q(direct, "SELECT dlock_unlock('job')") is True, "dlock_unlock")
    close_all(b, direct)


@check("detached, transaction pooling: a worker that reconnects still holds its lock, extends and releases it")
def t_detached_reconnect():
    direct = connect()
    w = via_bouncer("txn", app="dlock-worker")
    tok, spid = row_of(w, "SELECT dlock_acquire('worker-job', '10s'), pg_backend_pid()")
    exp0 = detached_row(direct, "worker-job")["lease_expires"]
    w.close()
    end_server_connection(direct, spid)
    w = via_bouncer("txn", app="dlock-worker")
    other = via_bouncer("txn", app="dlock-other")
    expect(q(other, "SELECT dlock_acquire('worker-job', '30s')") is None, "another client got it")
    r = detached_row(other, "worker-job")
    expect(r is not None and r["token"] == tok, "view after the reconnect: %r" % (r,))
    exp1 = q(w, "SELECT dlock_extend('worker-job', %s, '1 min')", (tok,))
    expect(isinstance(exp1, datetime.datetime) and exp1.tzinfo is not None, "dlock_extend returned %r" % (exp1,))
    expect(exp1 > exp0, "new expiry %s not after the old one %s" % (exp1, exp0))
    r = detached_row(other, "worker-job")
    expect(r["lease_expires"] == exp1 and r["token"] == tok, "view after the extension: %r" % (r,))
    expect(q(other, "SELECT dlock_acquire('worker-job', '30s')") is None, "another client got it after the extension")
    expect(q(w, "SELECT dlock_release('worker-job', %s)", (tok,)) is True, "release after the reconnect")
    tok2 = q(other, "SELECT dlock_acquire('worker-job', '30s')")
    expect(tok2 is not None and tok2 > tok, "the next acquisition got %r after %r" % (tok2, tok))
    expect(q(other, "SELECT dlock_release('worker-job', %s)", (tok2,)) is True, "release")
    expect_free(direct, "worker-job")
    close_all(w, other, direct)


@check("detached, transaction pooling: a lease that runs out frees the lock; the old token gets 55P03")
def t_detached_lease_runs_out():
    direct = connect()
    w = via_bouncer("txn", app="dlock-worker")
    tok = q(w, "SELECT dlock_acquire('lease-job', '2s')")
    expect(tok is not None, "acquire")
    w.close()
    w = via_bouncer("txn", app="dlock-worker")
    other = via_bouncer("txn", app="dlock-other")
    expect(q(other, "SELECT dlock_acquire('lease-job', '30s')") is None, "another client got it within the lease")
    exp0 = detached_row(direct, "lease-job")["lease_expires"]
    exp1 = q(w, "SELECT dlock_extend('lease-job', %s, '1s')", (tok,))
    expect(exp1 is not None and exp1 > exp0 - datetime.timedelta(seconds=1.5),
           "dlock_extend returned %r (was %r)" % (exp1, exp0))
    # the worker stops extending; the server releases the lock at the expiry
    t_exp = time.time() + (exp1 - datetime.datetime.now(exp1.tzinfo)).total_seconds()
    expect(fault.wait_until(lambda: detached_row(direct, "lease-job") is None, timeout=10),
           "still held 10 s after the lease")
    late = time.time() - t_exp
    expect(-0.05 < late < 2.0, "released %.2f s after the lease expiry" % late)
    expect(q(direct, "SELECT count(*) FROM dlock_locks WHERE name = 'lease-job'") == 0, "rows left in dlock_locks")
    expect_sqlstate(w, "SELECT dlock_extend('lease-job', %s, '30s')", (tok,), "55P03", "extend after the expiry")
    tok2 = q(other, "SELECT dlock_acquire('lease-job', '30s')")
    expect(tok2 is not None and tok2 > tok, "the next acquisition got %r after %r" % (tok2, tok))
    expect_sqlstate(w, "SELECT dlock_extend('lease-job', %s, '30s')", (tok,), "55P03",
                    "extend with the expired token once another client holds the name")
    del w.notices[:]
    expect(q(w, "SELECT dlock_release('lease-job', %s)", (tok,)) is False, "release with the expired token")
    expect(warnings_of(w), "no WARNING from the release with the expired token")
    r = detached_row(direct, "lease-job")
    expect(r is not None and r["token"] == tok2, "the new holder's lock after the stale release: %r" % (r,))
    expect(q(other, "SELECT dlock_release('lease-job', %s)", (tok2,)) is True, "the new holder releases")
    expect_free(direct, "lease-job")
    close_all(w, other, direct)


@check("detached, transaction pooling: a wrong token releases nothing (false and a WARNING), extends nothing (55000)")
def t_detached_wrong_token():
    direct = connect()
    a = via_bouncer("txn", app="dlock-detached-a")
    tok = q(a, "SELECT dlock_acquire('tokened', '30s')")
    del a.notices[:]
    expect(q(a, "SELECT dlock_release('tokened', %s)", (tok + 1,)) is False, "release with token + 1")
    w = warnings_of(a)
    expect(len(w) == 1, "WARNINGs from the release with a wrong token: %r" % (w,))
    r = detached_row(direct, "tokened")
    expect(r is not None and r["token"] == tok, "the lock after a release with a wrong token: %r" % (r,))
    expect(q(direct, "SELECT dlock_acquire('tokened', '30s')") is None, "free after a release with a wrong token")
    expect_sqlstate(a, "SELECT dlock_extend('tokened', %s, '1 min')", (tok - 1,), "55000", "extend with a wrong token")
    expect_sqlstate(a, "SELECT dlock_extend('other-name', %s, '1 min')", (tok,), "55000",
                    "extend of another name with this token")
    expect(q(a, "SELECT dlock_release('other-name', %s)", (tok,)) is False, "release of another name with this token")
    expect(detached_row(direct, "tokened")["token"] == tok, "the lock after the wrong calls")
    expect(q(a, "SELECT dlock_release('tokened', %s)", (tok,)) is True, "release with the token")
    del a.notices[:]
    expect(q(a, "SELECT dlock_release('tokened', %s)", (tok,)) is False, "a second release")
    expect(warnings_of(a), "no WARNING from a second release")
    expect_free(direct, "tokened")
    close_all(a, direct)


@check("detached: only the acquiring role or a superuser releases or extends (false + WARNING, 42501)")
def t_detached_roles():
    direct = connect()
    for role in ("dlock_worker", "dlock_intruder"):
        q(direct, "DROP ROLE IF EXISTS %s" % role)
        q(direct, "CREATE ROLE %s LOGIN NOSUPERUSER" % role)
    try:
        worker = direct_as("dlock_worker", tcp=True, app="dlock-role-worker")
        tok = q(worker, "SELECT dlock_acquire('guarded', '30s')")
        expect(tok is not None, "a non-superuser acquires")
        r = detached_row(direct, "guarded")
        expect(r["username"] == "dlock_worker", "username %r" % r["username"])
        expect(r["client_addr"] == "127.0.0.1", "client_addr %r" % r["client_addr"])
        expect(r["application_name"] == "dlock-role-worker", "application_name %r" % r["application_name"])
        intruder = direct_as("dlock_intruder")
        # as pg_stat_activity: another role sees the row, not the client address
        expect(q(intruder, "SELECT row(username, client_addr IS NULL)::text FROM dlock_locks "
                           "WHERE name = 'guarded'") == "(dlock_worker,t)",
               "another role's view of the row")
        expect(q(worker, "SELECT client_addr::text FROM dlock_locks WHERE name = 'guarded'") == "127.0.0.1/32",
               "the acquiring role sees its client address")
        expect(q(intruder, "SELECT dlock_release('guarded', %s)", (tok,)) is False, "another role released it")
        expect(warnings_of(intruder), "no WARNING when another role releases")
        expect_sqlstate(intruder, "SELECT dlock_extend('guarded', %s, '1 min')", (tok,), "42501",
                        "extend by another role")
        # the same through the pooler, with the role set for one transaction
        p = via_bouncer("txn")
        p.autocommit = False
        with p.cursor() as cur:
            cur.execute("SET LOCAL ROLE dlock_intruder")
            cur.execute("SELECT dlock_release('guarded', %s)", (tok,))
            expect(cur.fetchone()[0] is False, "another role released it through the pooler")
        p.commit()
        with p.cursor() as cur:
            cur.execute("SET LOCAL ROLE dlock_intruder")
            try:
                cur.execute("SELECT dlock_extend('guarded', %s, '1 min')", (tok,))
                raise AssertionError("another role extended it through the pooler")
            except psycopg2.Error as e:
                expect(e.pgcode == "42501", "extend by another role through the pooler: %s %s" % (e.pgcode, e.pgerror))
        p.rollback()
        r = detached_row(direct, "guarded")
        expect(r is not None and r["token"] == tok, "the lock after another role's calls: %r" % (r,))
        expect(q(intruder, "SELECT dlock_acquire('guarded', '30s')") is None, "another role acquired it")
        # the acquiring role can extend; a superuser (through the pooler) can release
        expect(q(worker, "SELECT dlock_extend('guarded', %s, '1 min')", (tok,)) is not None, "the role extends")
        p.autocommit = True
        expect(q(p, "SELECT dlock_release('guarded', %s)", (tok,)) is True, "a superuser releases")
        expect_free(direct, "guarded")
        close_all(worker, intruder, p)
    finally:
        for role in ("dlock_worker", "dlock_intruder"):
            try:
                q(direct, "DROP ROLE IF EXISTS %s" % role)
            except psycopg2.Error:
                pass
        direct.close()


def bouncer_call(sql, params=None, app="dlock-waiting"):
    """One statement on its own client connection through the "txn" pool."""
    return fault.Waiter(sql, params, conn=via_bouncer("txn", app=app))


@check("detached, transaction pooling: a waiting acquisition gets the lock when it is released, with a larger token")
def t_detached_wait():
    direct = connect()
    a = via_bouncer("txn", app="dlock-detached-a")
    ta = q(a, "SELECT dlock_acquire('queue-job', '30s')")
    expect(ta is not None, "A acquires")
    b = bouncer_call("SELECT dlock_acquire('queue-job', '30s', timeout => '5s')")
    b.start()
    expect(fault.wait_until(lambda: q(direct, "SELECT count(*) FROM dlock_locks "
                                              "WHERE name = 'queue-job' AND NOT granted") == 1, timeout=5),
           "the waiting acquisition is not in dlock_locks")
    expect(b.is_alive(), "B returned %r / %r while A held the name" % (b.result, b.error))
    released = []
    rel = threading.Thread(target=lambda: (time.sleep(0.5),
                                           released.append(q(a, "SELECT dlock_release('queue-job', %s)", (ta,)))),
                           daemon=True)
    rel.start()
    rel.join(10)
    b.join(10)
    expect(released == [True], "A's release: %r" % (released,))
    expect(b.error is None and isinstance(b.result, int), "B got %r / %r" % (b.result, b.error))
    expect(b.result > ta, "B's token %r not above A's %r" % (b.result, ta))
    expect(0.4 < b.elapsed < 5, "B waited %.2f s" % b.elapsed)
    r = detached_row(direct, "queue-job")
    expect(r is not None and r["token"] == b.result and r["scope"] == "detached", "view after the wait: %r" % (r,))
    expect(r["username"] == "postgres" and r["application_name"] == "dlock-waiting",
           "username %r, application_name %r" % (r["username"], r["application_name"]))
    expect(q(direct, "SELECT count(*) FROM dlock_locks WHERE name = 'queue-job' AND NOT granted") == 0,
           "a waiter row is left")
    holder = r["pid"]
    expect(q(a, "SELECT dlock_acquire('queue-job', '30s')") is None, "A got it back while B holds it")
    exp = q(b.conn, "SELECT dlock_extend('queue-job', %s, '1 min')", (b.result,))
    expect(exp is not None and exp > r["lease_expires"], "extending the waited-for lock gave %r" % (exp,))
    expect(q(b.conn, "SELECT dlock_release('queue-job', %s)", (b.result,)) is True, "B releases")
    expect_free(direct, "queue-job")
    # the process that waited held only this lock; it is not left behind
    expect(fault.wait_until(lambda: gone(direct, holder), timeout=10),
           "the process that held the waited-for lock (pid %d) is still there" % holder)
    # a wait that runs out returns NULL and leaves nothing queued
    ta2 = q(a, "SELECT dlock_acquire('queue-job', '30s')")
    c = bouncer_call("SELECT dlock_acquire('queue-job', '30s', timeout => '300ms')")
    c.start()
    c.join(10)
    expect(c.error is None and c.result is None, "a timed-out wait got %r / %r" % (c.result, c.error))
    expect(0.25 < c.elapsed < 3, "the timed-out wait took %.2f s" % c.elapsed)
    expect(q(direct, "SELECT count(*) FROM dlock_locks WHERE name = 'queue-job' AND NOT granted") == 0,
           "a waiter row is left after the timeout")
    expect(detached_row(direct, "queue-job")["token"] == ta2, "the holder after the timed-out wait")
    expect(q(a, "SELECT dlock_release('queue-job', %s)", (ta2,)) is True, "release")
    close_all(a, b.conn, c.conn, direct)


@check("detached, transaction pooling: a lock that had to wait is freed when its lease runs out")
def t_detached_wait_lease():
    direct = connect()
    a = via_bouncer("txn", app="dlock-detached-a")
    ta = q(a, "SELECT dlock_acquire('queue-lease', '30s')")
    b = bouncer_call("SELECT dlock_acquire('queue-lease', '1s', timeout => '5s')")
    b.start()
    expect(fault.wait_until(lambda: q(direct, "SELECT count(*) FROM dlock_locks "
                                              "WHERE name = 'queue-lease' AND NOT granted") == 1, timeout=5),
           "the waiting acquisition is not in dlock_locks")
    expect(q(a, "SELECT dlock_release('queue-lease', %s)", (ta,)) is True, "A's release")
    b.join(10)
    expect(b.error is None and isinstance(b.result, int) and b.result > ta, "B got %r / %r" % (b.result, b.error))
    holder = detached_row(direct, "queue-lease")["pid"]
    expect(fault.wait_until(lambda: detached_row(direct, "queue-lease") is None, timeout=10),
           "still held 10 s after a lease of 1 s")
    expect(fault.wait_until(lambda: gone(direct, holder), timeout=10),
           "the process that held it (pid %d) is still there" % holder)
    expect_sqlstate(b.conn, "SELECT dlock_extend('queue-lease', %s, '30s')", (b.result,), "55P03",
                    "extend after the lease ran out")
    expect_free(direct, "queue-lease")
    close_all(a, b.conn, direct)


@check("detached, transaction pooling: an acquisition whose transaction rolls back is undone; one that commits stays")
def t_detached_rollback():
    direct = connect()
    a = via_bouncer("txn", app="dlock-detached-a")
    a.autocommit = False
    with a.cursor() as cur:
        cur.execute("SELECT dlock_acquire('rolled', '30s')")
        tok = cur.fetchone()[0]
    expect(tok is not None, "acquire in a transaction")
    expect(q(direct, "SELECT dlock_acquire('rolled', '30s')") is None, "free while the acquiring transaction is open")
    a.rollback()
    expect(fault.wait_until(lambda: detached_row(direct, "rolled") is None, timeout=5), "held after ROLLBACK")
    expect_free(direct, "rolled")
    # an error later in the transaction
    with a.cursor() as cur:
        cur.execute("SELECT dlock_acquire('rolled', '30s')")
        tok2 = cur.fetchone()[0]
        try:
            cur.execute("SELECT 1 / 0")
        except psycopg2.errors.DivisionByZero:
            pass
    a.rollback()
    expect(tok2 is not None and tok2 > tok, "second acquisition %r" % (tok2,))
    expect(fault.wait_until(lambda: detached_row(direct, "rolled") is None, timeout=5), "held after an error")
    expect_free(direct, "rolled")
    # the token of an undone acquisition is worth nothing
    expect(q(direct, "SELECT dlock_release('rolled', %s)", (tok2,)) is False, "release of an undone acquisition")
    # committed: held after the transaction and the server connection
    with a.cursor() as cur:
        cur.execute("SELECT dlock_acquire('rolled', '30s'), pg_backend_pid()")
        tok3, spid = cur.fetchone()
    a.commit()
    a.close()
    end_server_connection(direct, spid)
    r = detached_row(direct, "rolled")
    expect(r is not None and r["token"] == tok3, "after COMMIT: %r" % (r,))
    expect(q(direct, "SELECT dlock_release('rolled', %s)", (tok3,)) is True, "release")
    expect_free(direct, "rolled")
    direct.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    fault.ARGS = ap.parse_args()
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    c.close()
    start_bouncer()
    try:
        for fn in (t_tx_xact, t_tx_session_leaks, t_sess_discard,
                   t_detached_other_client, t_detached_reconnect, t_detached_lease_runs_out,
                   t_detached_wrong_token, t_detached_roles, t_detached_wait, t_detached_wait_lease,
                   t_detached_rollback):
            fn()
    finally:
        stop_bouncer()
    print("# all pooler tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
