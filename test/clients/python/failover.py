#!/usr/bin/env python3
"""failover.py: what a psycopg 3 client sees when the primary that holds its dlock lock
goes away (a switchover or failover), and how it gets the lock back on the new primary.
Run by test/clients/run --failover (test/ha.py drives it):

  DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go python3 failover.py

Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (what the
next call on the old connection raised), then "retaken T2 P2 SECONDS" and
"# all python failover tests ran"; "not ok - python failover: ..." and exit 1 otherwise.
"""
import os
import sys
import time

import psycopg  # psycopg 3

NAME = "ha-python"


def fail(why):
    print("not ok - python failover: %s" % why, flush=True)
    sys.exit(1)


def connect_primary():
    """libpq takes every host of the cluster and, with target_session_attrs=read-write,
    keeps the first that accepts writes."""
    hosts, ports = zip(*(h.rsplit(":", 1) for h in os.environ["DLOCK_FAILOVER_HOSTS"].split(",")))
    return psycopg.connect(host=",".join(hosts), port=",".join(ports), user="postgres", dbname="postgres",
                           target_session_attrs="read-write", connect_timeout=5, autocommit=True)


def lock_and_token(conn):
    """Takes the lock with a 60 s lease; returns its token and the server's port."""
    if conn.execute("SELECT dlock_try(%s, lease => '60 s')", (NAME,)).fetchone()[0] is not True:
        fail("dlock_try on the primary was not true")
    return conn.execute("SELECT dlock_token(%s), inet_server_port()", (NAME,)).fetchone()


def main():
    conn = connect_primary()
    print("held %d %d" % lock_and_token(conn), flush=True)

    go = os.environ["DLOCK_FAILOVER_GO"]
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            fail("no %s within 120 s" % go)
        time.sleep(0.1)

    # The old connection: its server ended the session, and the lock with it.
    try:
        print("lost none %r" % conn.execute("SELECT dlock_token(%s)", (NAME,)).fetchone()[0])
    except psycopg.Error as e:
        print("lost %s.%s %s %s" % (type(e).__module__, type(e).__qualname__, e.sqlstate or "no SQLSTATE",
                                    str(e).split("\n", 1)[0]))
    sys.stdout.flush()
    conn.close()

    # Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
    start = time.monotonic()
    while True:
        conn = None
        try:
            conn = connect_primary()
            token, port = lock_and_token(conn)
            break
        except psycopg.Error as e:
            if conn is not None:
                conn.close()
            if time.monotonic() - start > 60:
                fail("no primary within 60 s: %s" % e)
            time.sleep(0.2)  # no primary yet
    print("retaken %d %d %.1f" % (token, port, time.monotonic() - start), flush=True)
    conn.execute("SELECT dlock_unlock(%s)", (NAME,))
    conn.close()
    print("# all python failover tests ran", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # pylint: disable=broad-except
        fail("unexpected %s: %s" % (type(e).__name__, e))
