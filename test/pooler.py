#!/usr/bin/env python3
"""test/pooler.py: dlock behind pgbouncer, from a driver (psycopg2).

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/pooler.py --port 54321
It starts its own pgbouncer (as postgres, on port PORT + 3, socket in
/tmp/dlock-PORT) with two pools of one server connection each: "tx" in
transaction mode and "sess" in session mode (server_reset_query DISCARD ALL,
pgbouncer's default).  Prints "ok - name" / "not ok - name" lines like
test/fault.py, whose helpers it uses, then "# all pooler tests ran".

What it shows is what README.md says about poolers: behind transaction
pooling use the *_xact functions (a session lock stays with the server
connection and the next client gets it); behind session pooling a client's
session locks go when it leaves, and dlock forgets them.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402 - the helpers, once the path is set
from fault import check, expect, q, pid_of, connect, RESULTS  # noqa: E402

BOUNCER = None


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
    ini = os.path.join(d, "pgbouncer.ini")
    with open(ini, "w") as f:
        f.write("[databases]\n"
                "tx = %s pool_mode=transaction\n"
                "sess = %s pool_mode=session\n"
                "[pgbouncer]\n"
                "listen_addr = 127.0.0.1\n"
                "listen_port = %d\n"
                "unix_socket_dir = %s\n"
                "auth_type = any\n"
                "pool_mode = session\n"
                "server_reset_query = DISCARD ALL\n"
                "ignore_startup_parameters = extra_float_digits\n"
                "logfile = %s/pgbouncer.log\n"
                "pidfile = %s/pgbouncer.pid\n" % (server, server, bouncer_port(), d, d, d))
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
    try:
        q(b, "SELECT dlock_token('per-client')")
        raise AssertionError("the next client has a token for a lock it does not hold")
    except psycopg2.errors.ObjectNotInPrerequisiteState:
        pass
    # the lease would have run out by now: the reaper must leave the server
    # connection alone, the lock it was on is gone
    time.sleep(3.5)
    expect(pid_of(b) == spid, "the server connection was ended over a lease on a released lock")
    expect(q(b, "SELECT dlock_try('per-client')") is True, "take again")
    expect(q(b, "SELECT dlock_token('per-client')") > tok, "token not above the previous holder's")
    q(b, "SELECT dlock_unlock('per-client')")
    for c in (b, direct):
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    fault.ARGS = ap.parse_args()
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    c.close()
    start_bouncer()
    try:
        for fn in (t_tx_xact, t_tx_session_leaks, t_sess_discard):
            fn()
    finally:
        stop_bouncer()
    print("# all pooler tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
