#!/usr/bin/env python3
"""test/fault.py: dlock under faults, from a driver (psycopg2).

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/fault.py --port 54321
It kills, cancels and stops (SIGSTOP) server processes, so it needs root and
a cluster of its own.  Restarts and crashes are TAP tests (test/t/).
Prints one "ok - name" or "not ok - name" line per check, then
"# all fault tests ran".

When test/run tests several majors, each runs its share of the checks
(DLOCK_FAULT_SHARE=K/N, from test/run; dealt out by how long each check
takes), so that the majors together run every check once; the one check
whose outcome depends on the major runs on every major.  Without
DLOCK_FAULT_SHARE, or with DLOCK_FAULT_ALL=1, every check runs.

Timing: the checks that a lease is enforced allow the lease plus a few
seconds; they check that the lock comes back at all and in bounded time, not
how fast (that is for benchmarks).
"""
import argparse
import contextlib
import datetime
import os
import re
import signal
import sys
import threading
import time
import traceback

import psycopg2
import psycopg2.errors

ARGS = None
RESULTS = []


def logfile():
    return "/tmp/dlock-%d/log" % ARGS.port


def connect(dbname="postgres", app="dlock-fault", user="postgres"):
    conn = psycopg2.connect(host="/tmp/dlock-%d" % ARGS.port, port=ARGS.port,
                            user=user, dbname=dbname, application_name=app)
    conn.autocommit = True
    return conn


def q(conn, sql, params=None):
    """The first column of the first row, or None."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone() if cur.description else None
        return row[0] if row else None


def expect_error(cls, what, conn, sql, params=None):
    """The statement must fail with cls (a psycopg2.errors class): the error,
    for further checks; what is said if it does not fail."""
    try:
        q(conn, sql, params)
    except cls as e:
        return e
    raise AssertionError(what)


def pid_of(conn):
    return q(conn, "SELECT pg_backend_pid()")


def log_size():
    return os.path.getsize(logfile())


def log_since(offset):
    with open(logfile(), "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def wait_until(pred, timeout=20.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except psycopg2.Error:
            pass
        time.sleep(step)
    return False


def process_pid(backend_type):
    """The pid of a server process, by its backend_type, or None."""
    c = connect()
    try:
        return q(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = %s", (backend_type,))
    finally:
        c.close()


def reaper_pid():
    return process_pid("dlock lease reaper")


class Waiter(threading.Thread):
    """Runs one statement on its own connection; keeps the result or error."""

    def __init__(self, sql, params=None, setup=(), conn=None):
        super().__init__(daemon=True)
        self.conn = conn or connect(app="dlock-fault-waiter")
        self.pid = pid_of(self.conn)
        for s in setup:
            q(self.conn, s)
        self.sql, self.params = sql, params
        self.result = self.error = None
        self.elapsed = None

    def run(self):
        t0 = time.monotonic()
        try:
            self.result = q(self.conn, self.sql, self.params)
        except psycopg2.Error as e:
            self.error = e
        self.elapsed = time.monotonic() - t0

    def start_and_wait_blocked(self, observer):
        self.start()
        ok = wait_until(lambda: q(observer, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                                  (self.pid,)))
        if not ok:
            raise AssertionError("waiter never blocked on the lock")


def held_and_awaited(name, wait_sql, setup=()):
    """A session holding name, an observer, and a Waiter blocked on wait_sql."""
    a, obs = connect(), connect()
    q(a, "SELECT dlock_try(%s)", (name,))
    w = Waiter(wait_sql, setup=setup)
    w.start_and_wait_blocked(obs)
    return a, obs, w


@contextlib.contextmanager
def stopped(pid):
    """The process is stopped (SIGSTOP) inside the block, so that whatever
    happens to it meanwhile is handled all at once when it continues."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def close_all(*conns):
    for c in conns:
        c.close()


def check(name, seconds=0.5, every_major=False):
    """A check, printing "ok - name" or "not ok - name".  seconds: about how
    long it takes (measured; 0.5 for anything under a second), by which the
    checks are shared out over the majors (share_of_checks); every_major:
    it runs on every major, not in one share (a cheap check whose outcome
    depends on the major)."""
    def deco(fn):
        def run():
            try:
                fn()
                RESULTS.append((name, True))
                print("ok - %s" % name, flush=True)
            except Exception as e:  # noqa: BLE001 - a test reports every failure
                RESULTS.append((name, False))
                print("not ok - %s" % name, flush=True)
                for line in traceback.format_exception(type(e), e, e.__traceback__)[-4:]:
                    for part in line.rstrip().splitlines():
                        print("#   " + part, flush=True)
        run.check_name = name
        run.fn_name = fn.__name__
        run.seconds = seconds
        run.every_major = every_major
        return run
    return deco


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- checks ---------------------------------------------------------------

@check("driver: parameters, interval timeouts, named arguments")
def t_driver():
    c = connect()
    expect(q(c, "SELECT dlock_try(%s)", ("driver-job",)) is True, "try")
    expect(q(c, "SELECT dlock_lock(%s, %s)", ("driver-job", datetime.timedelta(seconds=2))) is True, "re-entrant lock")
    expect(q(c, "SELECT dlock_lock(name => %s, timeout => %s, shared => %s)",
             ("driver-shared", datetime.timedelta(milliseconds=500), True)) is True, "named args")
    expect(q(c, "SELECT dlock_key(%s)", ("nightly-report",)) == -8663603374018903193, "key vector")
    expect(q(c, "SELECT dlock_unlock_all()") == 2, "unlock_all counts names")
    expect_error(psycopg2.errors.NullValueNotAllowed, "NULL name accepted",
                 c, "SELECT dlock_try(%s)", (None,))
    c.close()


@check("waiting: a timed wait sits in the lock queue (wait_event Lock/advisory), the view names it")
def t_wait_is_queue():
    a, obs, w = held_and_awaited("queued", "SELECT dlock_lock('queued', '30s')")
    ev = q(obs, "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = %s", (w.pid,))
    expect(ev == "Lock/advisory", "wait event is %r" % ev)
    row = q(obs, "SELECT row(name, scope, granted, wait_time > '0'::interval)::text FROM dlock_locks "
                 "WHERE pid = %s", (w.pid,))
    expect(row == "(queued,session,f,t)", "view row of the waiter: %r" % row)
    q(a, "SELECT dlock_unlock('queued')")
    w.join(10)
    expect(w.result is True, "waiter got %r / %r" % (w.result, w.error))
    expect(q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'queued' AND NOT granted") == 0, "no waiter left")
    close_all(a, obs, w.conn)


@check("waiting: cancel and statement_timeout are errors, not a false from the timeout")
def t_wait_errors():
    a, obs, w = held_and_awaited("cancelled", "SELECT dlock_lock('cancelled', '60s')")
    q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))
    w.join(10)
    expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "cancel gave %r / %r" % (w.result, w.error))
    w2 = Waiter("SELECT dlock_lock('cancelled', '60s')", setup=["SET statement_timeout = '300ms'"])
    w2.start()
    w2.join(10)
    expect(isinstance(w2.error, psycopg2.errors.QueryCanceled) and "statement timeout" in str(w2.error),
           "statement_timeout gave %r / %r" % (w2.result, w2.error))
    # neither left anything behind, and the waiters' sessions still work
    expect(q(obs, "SELECT count(*) FROM dlock_names() WHERE pid IN (%s, %s)", (w.pid, w2.pid)) == 0, "entries left")
    expect(q(w.conn, "SELECT dlock_lock('cancelled', '100ms')") is False, "session usable after cancel")
    close_all(a, obs, w.conn, w2.conn)


@check("holder terminated: the waiter gets the lock, the holder's names are gone")
def t_holder_terminated():
    a, obs, w = held_and_awaited("terminated", "SELECT dlock_lock('terminated', '30s')")
    apid = pid_of(a)
    q(obs, "SELECT pg_terminate_backend(%s)", (apid,))
    w.join(15)
    expect(w.result is True, "waiter got %r / %r" % (w.result, w.error))
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_names() WHERE pid = %s", (apid,)) == 0),
           "the terminated holder's slot still has entries")
    expect(q(obs, "SELECT pid FROM dlock_locks WHERE name = 'terminated'") == w.pid, "view shows the new holder")
    close_all(obs, w.conn)


@check("leader election (info): a candidate that dies leaves the queue, a leader that dies hands over to the next")
def t_leader_election():
    # doc/recipes.md "Leader election": candidates wait in the queue with their address as info
    obs = connect()
    lead = connect()
    q(lead, "SELECT dlock_lock('election', info => 'node-a:5432')")
    b = Waiter("SELECT dlock_lock('election', info => 'node-b:5432')")
    b.start_and_wait_blocked(obs)
    c = Waiter("SELECT dlock_lock('election', info => 'node-c:5432')")
    c.start_and_wait_blocked(obs)
    leader = "SELECT info FROM dlock_locks WHERE name = 'election' AND granted"
    queue = "SELECT string_agg(info, ',' ORDER BY since) FROM dlock_locks WHERE name = 'election' AND NOT granted"
    expect(q(obs, leader) == "node-a:5432", "leader before: %r" % q(obs, leader))
    expect(q(obs, queue) == "node-b:5432,node-c:5432", "queue before: %r" % q(obs, queue))
    # the next candidate dies while it waits: gone from the queue and the view
    q(obs, "SELECT pg_terminate_backend(%s)", (b.pid,))
    b.join(10)
    expect(wait_until(lambda: q(obs, queue) == "node-c:5432"), "queue after b died: %r" % q(obs, queue))
    # the leader dies: the candidate left is the leader, with its word
    q(obs, "SELECT pg_terminate_backend(%s)", (pid_of(lead),))
    c.join(15)
    expect(c.result is True, "c got %r / %r" % (c.result, c.error))
    expect(q(obs, leader) == "node-c:5432", "leader after: %r" % q(obs, leader))
    expect(q(obs, queue) is None, "queue after: %r" % q(obs, queue))
    q(c.conn, "SELECT dlock_unlock('election')")
    close_all(obs, c.conn)


class Listener:
    """A connection that LISTENs on dlock (1.7, doc/functions.md "Observers")
    and collects the events of one name, in the order they came (all of
    them in seen); each is checked to come from a dlock notifier process."""

    def __init__(self, name, dbname="postgres"):
        import json
        self.json = json
        self.name = name
        self.conn = connect(dbname=dbname, app="dlock-fault-listener")
        q(self.conn, "LISTEN dlock")
        self.events = []
        self.seen = []
        self.senders = {}

    def poll(self, timeout):
        import select
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if select.select([self.conn], [], [], 0.05)[0]:
                self.conn.poll()
                while self.conn.notifies:
                    n = self.conn.notifies.pop(0)
                    if n.pid not in self.senders:
                        self.senders[n.pid] = q(self.conn, "SELECT backend_type FROM pg_stat_activity "
                                                           "WHERE pid = %s", (n.pid,))
                    # (a notifier may have left already: no row)
                    expect(self.senders[n.pid] in ("dlock notifier", None),
                           "a notification from %s (%r)" % (n.pid, self.senders[n.pid]))
                    ev = self.json.loads(n.payload)
                    if ev.get("name") == self.name or ev.get("event") == "lost":
                        self.events.append(ev)
                        self.seen.append(ev)
        return self.events

    def kinds(self):
        return [(e["event"], e.get("info")) for e in self.seen]

    def wait_for(self, event, timeout=10.0, **fields):
        """The first event of that kind (and those field values) not yet taken."""
        end = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == event and all(ev.get(k) == v for k, v in fields.items()):
                    return self.events.pop(i)
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no %s event of %r %r (got %r)" % (event, self.name, fields, self.events))
            self.poll(min(left, 0.2))


@check("observers: notify => true announces a session hold's grant and release, a transaction's end "
       "(commit, rollback, a savepoint rolled back), with name, mode, scope, token, pid and info; "
       "a hold without it announces nothing", seconds=2)
def t_observers_backend():
    lis = Listener("obs-b")
    a = connect()
    apid = pid_of(a)
    q(a, "SELECT dlock_try('obs-b', notify => true, info => 'node-1')")
    tok = q(a, "SELECT dlock_token('obs-b')")
    ev = lis.wait_for("granted")
    expect(ev["mode"] == "exclusive" and ev["scope"] == "session" and ev["token"] == tok and
           ev["pid"] == apid and ev["info"] == "node-1", "granted: %r" % ev)
    q(a, "SELECT dlock_unlock('obs-b')")
    lis.wait_for("released", token=tok, scope="session")
    q(a, "BEGIN")
    q(a, "SELECT dlock_try_xact('obs-b', shared => true, notify => true)")
    q(a, "COMMIT")
    lis.wait_for("granted", scope="transaction", mode="shared")
    lis.wait_for("released", scope="transaction", mode="shared")
    q(a, "BEGIN")
    q(a, "SAVEPOINT s")
    q(a, "SELECT dlock_lock_xact('obs-b', mode => 'update', notify => true)")
    q(a, "ROLLBACK TO s")
    lis.wait_for("granted", mode="update")
    lis.wait_for("released", mode="update")
    q(a, "ROLLBACK")
    # without notify: nothing
    q(a, "SELECT dlock_try('obs-b'), dlock_unlock('obs-b')")
    expect(lis.poll(0.5) == [], "events of a hold without notify: %r" % lis.events)
    # a name and info beyond ASCII, quotes and backslashes: \\uXXXX in the payload
    odd = Listener('obs-\u00fc"\\\u2603\U0001f512')
    q(a, "SELECT dlock_try(%s, notify => true, info => %s), dlock_unlock(%s)",
      (odd.name, 'n\u00e4me "\\', odd.name))
    ev = odd.wait_for("granted")
    expect(ev["info"] == 'n\u00e4me "\\', "info %r" % ev["info"])
    odd.wait_for("released")
    close_all(a, lis.conn, odd.conn)


@check("observers: more databases with events than notifiers (dlock.max_notifiers): every database's "
       "events come, a notifier leaving for another's", seconds=4)
def t_observers_databases():
    admin = connect()
    dbs = ["dlock_obs_%d" % i for i in range(4)]
    for db in dbs:
        q(admin, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
        q(admin, "CREATE DATABASE %s" % db)
    conns, listeners = [], []
    for db in dbs:
        c = connect(dbname=db)
        q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
        conns.append(c)
        listeners.append(Listener("obs-db", dbname=db))
    for rnd in range(2):
        for c in conns:
            q(c, "SELECT dlock_try('obs-db', notify => true), dlock_unlock('obs-db')")
        for db, lis in zip(dbs, listeners):
            lis.wait_for("granted", timeout=15)
            lis.wait_for("released", timeout=15)
    # two busy databases (an event every 40 ms each) do not keep a third's
    # event waiting: a busy notifier gives its turn after a second
    stop = threading.Event()

    def busy(c):
        while not stop.is_set():
            q(c, "SELECT dlock_try('obs-db', notify => true), dlock_unlock('obs-db')")
            time.sleep(0.04)
    threads = [threading.Thread(target=busy, args=(conns[i],), daemon=True) for i in (0, 1)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    q(conns[2], "SELECT dlock_try('obs-db', notify => true), dlock_unlock('obs-db')")
    try:
        listeners[2].wait_for("released", timeout=5)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    expect(time.monotonic() - t0 < 5, "a quiet database waited %.1f s" % (time.monotonic() - t0))
    close_all(*conns)
    close_all(*[lis.conn for lis in listeners])
    for db in dbs:
        q(admin, "DROP DATABASE %s WITH (FORCE)" % db)
    close_all(admin)


@check("observers: a follower learns of a new leader: the old leader's session ends (ended), its lease "
       "runs out (lease_expired, by the reaper ending the session), the waiting candidate's grant", seconds=4)
def t_observers_leader():
    lis = Listener("obs-l")
    obs, lead = connect(), connect()
    q(lead, "SELECT dlock_lock('obs-l', info => 'a', notify => true)")
    lis.wait_for("granted", info="a")
    b = Waiter("SELECT dlock_lock('obs-l', info => 'b', lease => '1s', notify => true)")
    b.start_and_wait_blocked(obs)
    q(obs, "SELECT pg_terminate_backend(%s)", (pid_of(lead),))
    lis.wait_for("ended", info="a")
    lis.wait_for("granted", info="b", pid=b.pid)
    b.join(10)
    expect(b.result is True, "b: %r / %r" % (b.result, b.error))
    # the old leader's end came before the new one's grant
    expect(lis.kinds()[-2:] == [("ended", "a"), ("granted", "b")], "order: %r" % lis.kinds())
    # b's lease runs out: the reaper ends its session
    ev = lis.wait_for("lease_expired", info="b", timeout=15)
    expect(ev["scope"] == "session", "lease_expired: %r" % ev)
    # a hand-over by dlock_unlock, many times: the end always before the next grant
    c, d = connect(), connect()
    for i in range(20):
        q(c, "SELECT dlock_lock('obs-l', info => 'c', notify => true)")
        w = Waiter("SELECT dlock_lock('obs-l', info => 'd', notify => true)", conn=d)
        w.start_and_wait_blocked(obs)
        q(c, "SELECT dlock_unlock('obs-l')")
        w.join(10)
        lis.wait_for("granted", info="d")
        q(d, "SELECT dlock_unlock('obs-l')")
        lis.wait_for("released", info="d")
    k = [x for x in lis.kinds() if x[1] in ("c", "d")]
    expect(k == [("granted", "c"), ("released", "c"), ("granted", "d"), ("released", "d")] * 20,
           "order of 20 hand-overs: %r" % k[:12])
    # a session that ends inside its transaction: one end, not two
    e = connect()
    q(e, "BEGIN")
    q(e, "SELECT dlock_try_xact('obs-l', info => 'e', notify => true)")
    q(obs, "SELECT pg_terminate_backend(%s)", (pid_of(e),))
    lis.wait_for("ended", info="e")
    lis.poll(1.0)
    expect([x for x in lis.kinds() if x[1] == "e"] == [("granted", "e"), ("ended", "e")],
           "a transaction's hold as its session ends: %r" % [x for x in lis.kinds() if x[1] == "e"])
    close_all(obs, b.conn, c, d, lis.conn)


@check("observers: a detached lock's grant (the lock holder), release, lease expiry and override, and the "
       "grant of a waited one (its waiter process), each announced by the process that holds it", seconds=5)
def t_observers_detached():
    lis = Listener("obs-d")
    a, b = connect(), connect()
    tok = q(a, "SELECT dlock_acquire('obs-d', '1s', notify => true)")
    ev = lis.wait_for("granted", token=tok)
    holder = q(a, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'")
    expect(ev["scope"] == "detached" and ev["pid"] == holder, "granted: %r (holder %s)" % (ev, holder))
    lis.wait_for("lease_expired", token=tok, timeout=10)
    tok = q(a, "SELECT dlock_acquire('obs-d', '30s', notify => true)")
    lis.wait_for("granted", token=tok)
    q(a, "SELECT dlock_release('obs-d', %s)", (tok,))
    lis.wait_for("released", token=tok)
    tok = q(a, "SELECT dlock_acquire('obs-d', '30s', notify => true)")
    lis.wait_for("granted", token=tok)
    q(b, "SELECT dlock_force_release('obs-d', %s)", (tok,))
    lis.wait_for("forced", token=tok)
    # a waited one: granted by its waiter process
    q(b, "SELECT dlock_try('obs-d')")
    w = Waiter("SELECT dlock_acquire('obs-d', '30s', timeout => '10s', notify => true)")
    w.start()
    wait_until(lambda: q(b, "SELECT count(*) FROM dlock_locks WHERE name = 'obs-d' AND NOT granted") > 0, 5)
    q(b, "SELECT dlock_unlock('obs-d')")
    w.join(15)
    expect(w.result is not None, "the waited acquisition: %r / %r" % (w.result, w.error))
    ev = lis.wait_for("granted", token=w.result)
    waiter = q(b, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock waiter'")
    expect(ev["pid"] == waiter, "a waited grant's pid %r, the waiter process %r" % (ev["pid"], waiter))
    q(w.conn, "SELECT dlock_release('obs-d', %s)", (w.result,))
    lis.wait_for("released", token=w.result)
    close_all(a, b, w.conn, lis.conn)


def wait_rows(obs, name, n):
    return wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND NOT granted", (name,)) == n, 5)


@check("semaphore: waiters (sessions and a detached one) are served in order; each release wakes the next at once; "
       "the first in line's blocked_by names the holders of the permits, the others' the first in line; "
       "the holders show N (permits) and their session's state")
def t_semaphore_queue():
    obs, a, b = connect(), connect(), connect()
    q(a, "SELECT dlock_try('sq', permits => 2)")
    q(b, "BEGIN")
    q(b, "SELECT dlock_try_xact('sq', permits => 2)")
    w1 = Waiter("SELECT dlock_lock('sq', timeout => '20s', info => 'w1', permits => 2)")
    w1.start()
    expect(wait_rows(obs, "sq", 1), "w1 never waited")
    w2 = Waiter("SELECT dlock_acquire('sq', '1 min', timeout => '20s', info => 'w2', permits => 2)")
    w2.start()
    expect(wait_rows(obs, "sq", 2), "w2 never waited")
    w3 = Waiter("SELECT dlock_lock('sq', timeout => '20s', info => 'w3', permits => 2)")
    w3.start()
    expect(wait_rows(obs, "sq", 3), "w3 never waited")
    queue = "SELECT string_agg(info, ',' ORDER BY since) FROM dlock_locks WHERE name = 'sq' AND NOT granted"
    expect(q(obs, queue) == "w1,w2,w3", "queue: %r" % q(obs, queue))
    expect(q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'sq' AND NOT granted AND permit IS NULL") == 3,
           "a waiter shows a permit")
    expect(q(obs, "SELECT dlock_try('sq', permits => 2)") is False, "a try got in while three wait")
    # blocked_by: the first in line (sleeping, in no lock wait) is blocked by
    # the permits' holders (1.6); the others wait for it in the lock manager
    pa, pb = q(a, "SELECT pg_backend_pid()"), q(b, "SELECT pg_backend_pid()")
    blocked = "SELECT blocked_by FROM dlock_locks WHERE name = 'sq' AND NOT granted AND info = %s"
    expect(sleeping_first_in_line(obs, w1.pid), "w1 is not asleep at the head of the line")
    expect(sorted(q(obs, blocked, ("w1",)) or []) == sorted([pa, pb]),
           "the first in line's blocked_by: %r, the holders %r" % (q(obs, blocked, ("w1",)), [pa, pb]))
    expect(w1.pid in (q(obs, blocked, ("w3",)) or []) and pa not in q(obs, blocked, ("w3",)),
           "w3's blocked_by: %r, the first in line %r (and w2's waiter process, ahead of it)"
           % (q(obs, blocked, ("w3",)), w1.pid))
    holders = ("SELECT string_agg(permits || ' ' || session_state, ',' ORDER BY pid) FROM dlock_locks "
               "WHERE name = 'sq' AND granted")
    expect(q(obs, holders) in ("2 idle,2 idle in transaction", "2 idle in transaction,2 idle"),
           "the holders' N and state: %r" % q(obs, holders))
    # an unlock: the first in line, at once (not at its next look, a second later)
    t0 = time.monotonic()
    q(a, "SELECT dlock_unlock('sq')")
    w1.join(10)
    expect(w1.result is True and time.monotonic() - t0 < 0.75,
           "w1 got %r / %r after %.2f s" % (w1.result, w1.error, time.monotonic() - t0))
    expect(q(obs, queue) == "w2,w3", "queue after the unlock: %r" % q(obs, queue))
    # a COMMIT: the next, the detached one
    t0 = time.monotonic()
    q(b, "COMMIT")
    w2.join(10)
    expect(w2.result is not None and time.monotonic() - t0 < 0.75,
           "w2 got %r / %r after %.2f s" % (w2.result, w2.error, time.monotonic() - t0))
    expect(q(obs, "SELECT scope FROM dlock_locks WHERE name = 'sq' AND info = 'w2' AND granted") == "detached",
           "w2's permit is not detached")
    # a holder's session ends: the last
    t0 = time.monotonic()
    q(obs, "SELECT pg_terminate_backend(%s)", (w1.pid,))
    w3.join(10)
    expect(w3.result is True and time.monotonic() - t0 < 0.75,
           "w3 got %r / %r after %.2f s" % (w3.result, w3.error, time.monotonic() - t0))
    expect(q(obs, "SELECT string_agg(info || ':' || permit, ',' ORDER BY info) FROM dlock_locks WHERE name = 'sq'")
           in ("w2:2,w3:1", "w2:1,w3:2"), "holders: %r" %
           q(obs, "SELECT string_agg(info || ':' || permit, ',' ORDER BY info) FROM dlock_locks WHERE name = 'sq'"))
    q(w3.conn, "SELECT dlock_unlock('sq')")
    q(obs, "SELECT dlock_release('sq', %s)", (w2.result,))
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                     "AND (classid::bigint << 32 | objid::bigint) = dlock_key('sq') & x'ffffffffffffffff'::bigint") == 0),
           "left in pg_locks")
    close_all(obs, a, b, w2.conn, w3.conn)


def sleeping_first_in_line(obs, pid):
    return wait_until(lambda: q(obs, "SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = %s",
                                (pid,)), 5)


@check("semaphore: a deadlock through its first in line is found (40P01), also when both holders wait through one session, "
       "and a permit shared by plain shared holders counts as blocked by one of them", seconds=1)
def t_semaphore_deadlock():
    # two holders of the two permits wait (through q's lock) for w, first in line
    obs, h1, h2, qs = connect(), connect(), connect(), connect()
    q(h1, "SELECT dlock_try('sd', permits => 2)")
    q(h2, "SELECT dlock_try('sd', permits => 2)")
    q(qs, "SELECT dlock_try('sd-q')")
    w1 = Waiter("SELECT dlock_lock('sd-q', timeout => '20s')", conn=h1)
    w1.start_and_wait_blocked(obs)
    w2 = Waiter("SELECT dlock_lock('sd-q', timeout => '20s')", conn=h2)
    w2.start_and_wait_blocked(obs)
    w = Waiter("SELECT dlock_lock('sd', timeout => '20s', permits => 2)")
    w.start()
    expect(sleeping_first_in_line(obs, w.pid), "w never slept first in line")
    # q lines up behind w: h1 -> q -> w and h2 -> q -> w
    qw = Waiter("SELECT dlock_lock('sd', timeout => '20s', permits => 2)", conn=qs)
    qw.start_and_wait_blocked(obs)
    w.join(10)
    expect(w.error is not None and w.error.pgcode == "40P01", "w got %r / %r" % (w.result, w.error))
    # then q, first in line now, is in the same cycle (its lock holds both holders)
    qw.join(10)
    expect(qw.error is not None and qw.error.pgcode == "40P01", "q got %r / %r" % (qw.result, qw.error))
    q(qs, "SELECT dlock_unlock('sd-q')")
    w1.join(10)
    q(h1, "SELECT dlock_unlock_all()")
    w2.join(10)
    expect(w1.result is True and w2.result is True, "holders got %r, %r" % (w1.result, w2.result))
    q(h2, "SELECT dlock_unlock_all()")
    expect(q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid >= 1000") == 0,
           "a turnstile or permit left")
    close_all(w.conn)

    # permit 1 held shared by s1 (waiting for w) and s2 (idle), permit 2 by h (waiting for w)
    s1, s2, h, wc = connect(), connect(), connect(), connect()
    q(s1, "SELECT dlock_try('sd', shared => true)")
    q(s2, "SELECT dlock_try('sd', shared => true)")
    q(h, "SELECT dlock_try('sd', permits => 2)")
    q(wc, "SELECT dlock_try('sd-q')")
    b1 = Waiter("SELECT dlock_lock('sd-q', timeout => '20s')", conn=s1)
    b1.start_and_wait_blocked(obs)
    b2 = Waiter("SELECT dlock_lock('sd-q', timeout => '20s')", conn=h)
    b2.start_and_wait_blocked(obs)
    t0 = time.monotonic()
    answer = None
    try:
        answer = q(wc, "SELECT dlock_lock('sd', timeout => '10s', permits => 2)")
        got = None
    except psycopg2.Error as e:
        got = e.pgcode
    expect(got == "40P01" and time.monotonic() - t0 < 5, "w got %r / %r after %.1f s" % (answer, got, time.monotonic() - t0))
    # sd-q goes to s1, then (once s1 lets go) to h: not a 10 s join on h
    q(wc, "SELECT dlock_unlock_all()")
    b1.join(10)
    q(s1, "SELECT dlock_unlock_all()")
    b2.join(10)
    for c in (s2, h):
        q(c, "SELECT dlock_unlock_all()")
    close_all(obs, s1, s2, h, wc, qs, h1, h2)


@check("semaphore: the first in line's own shared hold of permit 1 does not hide a deadlock, whatever the order "
       "of the lock table (8 names), nor does a request waiting for permit 1", seconds=3.5, every_major=True)
def t_semaphore_deadlock_own_share():
    # S and T hold the name shared (permit 1), U holds permit 2; S holds L,
    # T and U wait for L; S, first in line for a permit, waits for T and U:
    # a deadlock, found whether S's own hold comes first in the lock table
    # or T's (1.5 hung in the first case)
    obs = connect()
    for i in range(8):
        name = "sdo-%d" % i
        sc, tc, uc = connect(), connect(), connect()
        q(sc, "SELECT dlock_try(%s, shared => true)", (name,))
        q(tc, "SELECT dlock_try(%s, shared => true)", (name,))
        q(uc, "SELECT dlock_try(%s, permits => 2)", (name,))
        q(sc, "SELECT dlock_try(%s)", (name + "-L",))
        bt = Waiter("SELECT dlock_lock(%s, timeout => '20s')", (name + "-L",), conn=tc)
        bt.start_and_wait_blocked(obs)
        bu = Waiter("SELECT dlock_lock(%s, timeout => '20s')", (name + "-L",), conn=uc)
        bu.start_and_wait_blocked(obs)
        t0 = time.monotonic()
        got = answer = None
        try:
            answer = q(sc, "SELECT dlock_lock(%s, timeout => '8s', permits => 2)", (name,))
        except psycopg2.Error as e:
            got = e.pgcode
        expect(got == "40P01" and time.monotonic() - t0 < 5,
               "%s: the first in line got %r / %r after %.1f s" % (name, answer, got, time.monotonic() - t0))
        # L goes to T, then (once T lets go) to U: not a 10 s join on U
        q(sc, "SELECT dlock_unlock_all()")
        bt.join(10)
        q(tc, "SELECT dlock_unlock_all()")
        bu.join(10)
        q(uc, "SELECT dlock_unlock_all()")
        close_all(sc, tc, uc)
    # permit 1 held shared by the first in line A alone, and awaited by D (a
    # plain exclusive caller) that waits for A's share: D's request keeps A
    # from permit 1 too; permit 2's holder E waits for A: a deadlock
    ac, dc, ec = connect(), connect(), connect()
    q(ac, "SELECT dlock_try('dz', shared => true)")
    q(ec, "SELECT dlock_try('dz', permits => 2)")
    q(ac, "SELECT dlock_try('dz2')")
    bd = Waiter("SELECT dlock_lock('dz', timeout => '20s')", conn=dc)
    bd.start_and_wait_blocked(obs)
    be = Waiter("SELECT dlock_lock('dz2', timeout => '20s')", conn=ec)
    be.start_and_wait_blocked(obs)
    t0 = time.monotonic()
    got = answer = None
    try:
        answer = q(ac, "SELECT dlock_lock('dz', timeout => '8s', permits => 2)")
    except psycopg2.Error as e:
        got = e.pgcode
    # (PostgreSQL 17 and later let a try that holds what a waiter wants go
    # ahead of it: A gets permit 1 at once, and there is no deadlock)
    jumps = int(q(obs, "SHOW server_version_num")) >= 170000
    expect((answer is True if jumps else got == "40P01") and time.monotonic() - t0 < 5,
           "a waiter on permit 1: the first in line got %r / %r after %.1f s"
           % (answer, got, time.monotonic() - t0))
    q(ac, "SELECT dlock_unlock_all()")
    bd.join(10)
    be.join(10)
    for c in (dc, ec):
        q(c, "SELECT dlock_unlock_all()")
    close_all(obs, ac, dc, ec)


@check("semaphore: no deadlock is taken where a holder will let go (a lease), nor where one permit's holder waits for nobody", seconds=2)
def t_semaphore_no_false_deadlock():
    obs, h1, h2, wc = connect(), connect(), connect(), connect()
    q(h1, "SELECT dlock_try('sf', lease => '2s', permits => 2)")
    q(h2, "SELECT dlock_try('sf', permits => 2)")
    q(wc, "SELECT dlock_try('sf-q')")
    b1 = Waiter("SELECT dlock_lock('sf-q', timeout => '20s')", conn=h1)
    b1.start_and_wait_blocked(obs)
    b2 = Waiter("SELECT dlock_lock('sf-q', timeout => '20s')", conn=h2)
    b2.start_and_wait_blocked(obs)
    # both wait for w, but h1's lease ends it: w gets its permit then, no 40P01
    t0 = time.monotonic()
    answer = q(wc, "SELECT dlock_lock('sf', timeout => '10s', permits => 2)")
    expect(answer is True and 1.0 < time.monotonic() - t0 < 6, "w got %r after %.1f s" % (answer, time.monotonic() - t0))
    q(wc, "SELECT dlock_unlock_all()")
    b1.join(10)
    b2.join(10)
    q(h2, "SELECT dlock_unlock_all()")
    close_all(obs, h2, wc)


@check("several detached names: the call's timeout bounds a stalled lock holder too (NULL at the deadline, none kept)", seconds=2)
def t_several_holder_stalled():
    # key order: sv-b < sv-c; sv-b is granted by the lock holder at once,
    # sv-c is waited for by a waiter process; once that one is granted the
    # holder must extend sv-b, and it is stopped
    obs, a = connect(), connect()
    q(a, "SELECT dlock_try('sv-c')")
    holder = process_pid("dlock lock holder")
    w = Waiter("SELECT dlock_acquire(ARRAY['sv-c', 'sv-b'], '30s', timeout => '2s')")
    w.start()
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'sv-c' AND NOT granted") == 1, 5),
           "the call never waited for sv-c")
    with stopped(holder):
        q(a, "SELECT dlock_unlock('sv-c')")
        w.join(10)
    expect(w.error is None and w.result is None, "told %r / %r" % (w.result, w.error))
    expect(w.elapsed < 3.5, "returned after %.1f s, its timeout was 2 s" % w.elapsed)
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name IN ('sv-b', 'sv-c')") == 0, 10),
           "left held: %s" % q(obs, "SELECT string_agg(name, ',') FROM dlock_locks WHERE name IN ('sv-b', 'sv-c')"))
    close_all(obs, a, w.conn)


@check("waiter terminated: it leaves the queue and the view, the holder is unaffected")
def t_waiter_terminated():
    a, obs, w = held_and_awaited("holder-stays", "SELECT dlock_lock('holder-stays')")
    q(obs, "SELECT pg_terminate_backend(%s)", (w.pid,))
    w.join(15)
    expect(w.error is not None, "terminated waiter returned %r" % w.result)
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'holder-stays'") == 1),
           "view still shows the dead waiter")
    expect(q(a, "SELECT dlock_unlock('holder-stays')") is True, "holder still holds")
    close_all(a, obs)


def lease_run(name, holder_steps, expect_log, bound):
    """A holder takes `name` with a 1s lease and runs holder_steps; a waiter
    must get the lock within `bound` seconds; the log must say expect_log."""
    off = log_size()
    a, obs = connect(), connect()
    apid = pid_of(a)
    holder = threading.Thread(target=holder_steps, args=(a,), daemon=True)
    holder.start()
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND granted", (name,)) == 1),
           "holder never took the lock")
    w = Waiter("SELECT dlock_lock(%s, '30s')", (name,))
    w.start()
    w.join(30)
    expect(w.result is True, "waiter got %r / %r" % (w.result, w.error))
    expect(w.elapsed < bound, "lock came back after %.1fs (bound %.1fs)" % (w.elapsed, bound))
    expect(wait_until(lambda: all(s in log_since(off) for s in expect_log), 5),
           "log lacks %r:\n%s" % (expect_log, log_since(off)))
    holder.join(10)
    obs.close()
    w.conn.close()
    return apid


@check("grant and cancel in one instant (waiter stopped): the call fails and does not keep the lock")
def t_grant_then_cancel():
    a, obs, w = held_and_awaited("grant-cancel", "SELECT dlock_lock('grant-cancel', '60s', lease => '1 min')")
    with stopped(w.pid):
        q(a, "SELECT dlock_unlock('grant-cancel')")       # granted to the stopped waiter
        q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))  # and cancelled before it runs
    w.join(10)
    expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "waiter got %r / %r" % (w.result, w.error))
    expect(q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (w.pid,)) == 0,
           "the cancelled waiter still holds the lock")
    expect(q(obs, "SELECT dlock_try('grant-cancel')") is True, "the lock is not free")
    close_all(a, obs, w.conn)


@check("grant and deadline in one instant (waiter stopped): true, and the lock is held and named")
def t_grant_at_deadline():
    a, obs, w = held_and_awaited("grant-deadline", "SELECT dlock_lock('grant-deadline', '300ms')")
    with stopped(w.pid):
        q(a, "SELECT dlock_unlock('grant-deadline')")
        time.sleep(0.6)                                   # the deadline passes while stopped
    w.join(10)
    expect(w.result is True, "waiter got %r / %r" % (w.result, w.error))
    expect(q(obs, "SELECT pid FROM dlock_locks WHERE name = 'grant-deadline' AND granted") == w.pid,
           "the view does not show the waiter holding it")
    expect(q(w.conn, "SELECT dlock_unlock('grant-deadline')") is True, "not held")
    close_all(a, obs, w.conn)


@check("timeout and statement_timeout both passed (waiter stopped): the statement timeout is raised, not false", seconds=1)
def t_deadline_and_statement_timeout():
    a, obs, w = held_and_awaited("two-deadlines", "SELECT dlock_lock('two-deadlines', '300ms')",
                                 setup=["SET statement_timeout = '500ms'"])
    with stopped(w.pid):
        time.sleep(1.0)                                   # both deadlines pass while stopped
    w.join(10)
    expect(isinstance(w.error, psycopg2.errors.QueryCanceled) and "statement timeout" in str(w.error),
           "waiter got %r / %r" % (w.result, w.error))
    close_all(a, obs, w.conn)


def expect_commit_fails(conn, what, rollback=True):
    """conn's commit must be refused over a lease (55P03); the client rolls
    back after it, unless the check is that the refusal ended the transaction."""
    try:
        conn.commit()
    except psycopg2.errors.LockNotAvailable as e:
        if rollback:
            conn.rollback()
        return e
    raise AssertionError(what)


def expect_commit_refused(conn, name, table, released=False, xact=False):
    """conn's open transaction created table; its commit must fail over name's
    lease, saying whether the lock is still being taken away or was released."""
    e = expect_commit_fails(conn, "committed past the lease of %s" % name, rollback=False)
    expect('cannot commit after the lease of lock "%s" expired' % name in str(e), str(e))
    if released:
        expect("was released in this transaction" in (e.diag.message_detail or ""), str(e))
        expect("next transaction" in (e.diag.message_hint or ""), str(e))
    else:
        expect("being taken away" in (e.diag.message_detail or ""), str(e))
        expect(("dlock_unlock" if xact is False else "that releases the lock") in (e.diag.message_hint or ""),
               str(e))
    conn.autocommit = True
    expect(q(conn, "SELECT count(*) FROM pg_class WHERE relname = %s", (table,)) == 0,
           "the work under the expired lease was committed")


@check("reaper stopped: a holder past its lease cannot commit, nor take the lock again; then it is ended", seconds=1.5)
def t_expired_cannot_commit():
    rp = reaper_pid()
    a = connect()
    b = connect()
    b.autocommit = False
    with stopped(rp):
        q(a, "SELECT dlock_try('stale-s', lease => '200ms')")
        with b.cursor() as cur:
            cur.execute("SELECT dlock_try_xact('stale-x', lease => '200ms')")
        time.sleep(0.5)
        # session scope: any commit fails; taking it again fails
        for sql in ("SELECT 1", "SELECT dlock_try('stale-s')", "SELECT dlock_lock('stale-s', lease => '1 hour')"):
            e = expect_error(psycopg2.errors.LockNotAvailable, "%s succeeded past the lease" % sql, a, sql)
            expect("expired at" in str(e), str(e))
        # nor can it prepare a transaction for someone else to commit
        q(a, "BEGIN")
        e = expect_error(psycopg2.errors.LockNotAvailable, "prepared past the lease",
                         a, "PREPARE TRANSACTION 'stale'")
        expect("cannot prepare a transaction after the lease" in str(e), str(e))
        q(a, "ROLLBACK")
        # releasing first does not help the transaction that worked under it
        d = connect()
        q(d, "SELECT dlock_try('stale-u', lease => '200ms')")
        time.sleep(0.5)
        d.autocommit = False
        with d.cursor() as cur:
            cur.execute("CREATE TEMP TABLE written_before_unlock (x int)")
            cur.execute("SELECT dlock_unlock('stale-u')")
            expect(cur.fetchone()[0] is True, "unlock")
        expect_commit_refused(d, "stale-u", "written_before_unlock", released=True)
        expect(q(d, "SELECT 1") == 1, "a transaction after the one that released it is still refused")
        e = connect()
        expect(q(e, "SELECT dlock_try('stale-u')") is True, "the released lock is not free")
        e.close()
        d.close()
        # transaction scope: taking it again and committing fail
        try:
            with b.cursor() as cur:
                cur.execute("SELECT dlock_try_xact('stale-x', lease => '1 hour')")
            raise AssertionError("re-taken past the lease")
        except psycopg2.errors.LockNotAvailable as e:
            expect("expired at" in str(e), str(e))
        b.rollback()
        with b.cursor() as cur:
            cur.execute("SELECT dlock_try_xact('stale-x2', lease => '200ms')")
            time.sleep(0.5)
            cur.execute("CREATE TEMP TABLE written_after_expiry (x int)")
        expect_commit_refused(b, "stale-x2", "written_after_expiry", xact=True)
    # the reaper ends the session holder
    apid = a.get_backend_pid()
    expect(wait_until(lambda: q(b, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (apid,)) == 0, 10),
           "the stale session holder was not ended")
    b.close()


@check("deadlock: the report names dlock's locks in words beside PostgreSQL's four numbers, "
       "in the client's DETAIL and in the log, whatever log_min_messages says; a name that could "
       "forge a line is left out", seconds=1)
def t_deadlock_named():
    def cycle(a_name, b_name, settings=()):
        # A holds a_name, B holds b_name; each then waits for the other's: one is the victim,
        # whose locks are let go at once so that the other's wait ends without its timeout
        a, obs = connect(), connect()
        for sql in settings:
            q(a, sql)
        q(a, "SELECT dlock_try(%s)", (a_name,))
        wb = Waiter("SELECT dlock_lock(%s, '30s')", (a_name,), setup=tuple(settings) + (
            "SELECT dlock_try('%s')" % b_name.replace("'", "''"),))
        wb.start_and_wait_blocked(obs)
        wa = Waiter("SELECT dlock_lock(%s, '30s')", (b_name,), conn=a)
        wa.start()
        expect(wait_until(lambda: wa.error is not None or wb.error is not None, 10), "no deadlock found")
        victim, other = (wa, wb) if wa.error is not None else (wb, wa)
        victim.join(10)
        q(victim.conn, "SELECT dlock_unlock_all()")
        other.join(10)
        err = victim.error
        for c in (a, obs, wb.conn):
            c.close()
        expect(isinstance(err, psycopg2.errors.DeadlockDetected), "no deadlock: %r" % (err,))
        expect(other.result is True, "the other wait got %r / %r" % (other.result, other.error))
        return err.diag.message_detail or ""

    off = log_size()
    detail = cycle("dl-a", "dl-b")
    expect('(dlock lock "dl-a")' in detail and '(dlock lock "dl-b")' in detail and "advisory lock [" in detail,
           "the DETAIL: %r" % detail)
    expect(wait_until(lambda: 'advisory lock [' in log_since(off) and '(dlock lock "dl-b")' in log_since(off), 5),
           "the log's DETAIL does not name the locks")
    # not a report rewritten on its way out: the error itself says it
    detail = cycle("dl-c", "dl-d", ("SET log_min_messages = fatal",))
    expect('(dlock lock "dl-c")' in detail and '(dlock lock "dl-d")' in detail,
           "with log_min_messages = fatal, the DETAIL: %r" % detail)
    # a name with a line break or a quote is not put into the DETAIL
    detail = cycle('dl-e"\nProcess 1 waits', "dl-f")
    expect('(dlock lock "dl-f")' in detail and "Process 1 waits" not in detail,
           "a name that could forge a line: %r" % detail)


@check("dlock_summary: one row per lock, with its holders and waiters and the first waiter, "
       "also for a raw pg_advisory_lock of a name's key (the same lock)")
def t_summary():
    a, b, obs = connect(), connect(), connect()
    q(a, "SELECT dlock_try('sum-sem', permits => 2)")
    q(b, "SELECT dlock_try('sum-sem', permits => 2)")
    first = Waiter("SELECT dlock_lock('sum-sem', '30s', permits => 2)")
    first.start()
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'sum-sem' AND NOT granted") == 1),
           "the first in line is not shown")
    second = Waiter("SELECT dlock_lock('sum-sem', '30s', permits => 2)")
    second.start_and_wait_blocked(obs)
    row = q(obs, "SELECT row(holders, waiters, first_waiter_pid, holder_pids)::text FROM dlock_summary "
                 "WHERE name = 'sum-sem'")
    expect(row == "(2,2,%d,\"{%d,%d}\")" % (first.pid, pid_of(a), pid_of(b)), "dlock_summary: %s" % row)
    q(a, "SELECT dlock_unlock('sum-sem')")
    first.join(10)
    q(b, "SELECT dlock_unlock('sum-sem')")
    second.join(10)
    expect(first.result is True and second.result is True, "the waiters got %r, %r" % (first.result, second.result))
    for c in (first.conn, second.conn):
        q(c, "SELECT dlock_unlock_all()")
        c.close()
    # a raw advisory lock of the key holds it; a dlock waiter names it
    q(a, "SELECT pg_advisory_lock(dlock_key('sum-raw'))")
    w = Waiter("SELECT dlock_lock('sum-raw', '30s')")
    w.start_and_wait_blocked(obs)
    row = q(obs, "SELECT row(name, holders, waiters, holder_pids)::text FROM dlock_summary "
                 "WHERE key = dlock_key('sum-raw')")
    expect(row == "(sum-raw,1,1,{%d})" % pid_of(a), "a raw holder and a dlock waiter: %s" % row)
    q(a, "SELECT pg_advisory_unlock(dlock_key('sum-raw'))")
    w.join(10)
    q(w.conn, "SELECT dlock_unlock_all()")
    w.conn.close()
    expect(q(obs, "SELECT count(*) FROM dlock_summary WHERE name LIKE 'sum-%'") == 0, "left in dlock_summary")
    for c in (a, b, obs):
        c.close()


@check("lease, session scope: the holder's session is terminated, the waiter gets the lock, logged", seconds=1)
def t_lease_session():
    def holder(a):
        q(a, "SELECT dlock_try('lease-s', lease => '1s')")
        # then idle: the reaper must act without any help from this session
    # what the holder's client is sent is what its backend logs (psycopg2 drops a FATAL's text)
    lease_run("lease-s", holder, ['lease of lock "lease-s" expired, terminating process', "held at session level",
                                  'FATAL:  terminating connection because the lease of lock "lease-s" ran out',
                                  "DETAIL:  The lease ran out at "], 1 + 4)


@check("lease, transaction scope, busy holder: its statement is cancelled, logged", seconds=1)
def t_lease_xact_busy():
    outcome = {}

    def holder(a):
        a.autocommit = False
        q(a, "SELECT dlock_try_xact('lease-x', lease => '1s')")
        try:
            q(a, "SELECT pg_sleep(20)")
            outcome["r"] = "not cancelled"
        except psycopg2.Error as e:
            # the client is told why (1.5: 57014, "due to user request")
            outcome["r"] = "cancelled" if (
                e.pgcode == "57L02" and
                e.diag.message_primary == 'canceling statement because the lease of lock "lease-x" ran out' and
                (e.diag.message_detail or "").startswith("The lease ran out at ")) else "%s %s" % (e.pgcode, e)
            a.rollback()
            outcome["alive"] = q(a, "SELECT 1") == 1
    lease_run("lease-x", holder, ['lease of lock "lease-x" expired, canceling the transaction of process'], 1 + 4)
    expect(outcome.get("r") == "cancelled", "holder: %r" % outcome)
    expect(outcome.get("alive"), "the cancelled holder's session should survive")


@check("lease, transaction scope, idle in transaction: cancelled, then terminated, logged", seconds=2)
def t_lease_xact_idle():
    def holder(a):
        a.autocommit = False
        q(a, "SELECT dlock_try_xact('lease-idle', lease => '1s')")
    lease_run("lease-idle", holder,
              ['lease of lock "lease-idle" expired, canceling the transaction of process',
               'lease of lock "lease-idle" expired, terminating process',
               "after its transaction was canceled",
               'FATAL:  terminating connection because the lease of lock "lease-idle" ran out'], 1 + 1 + 4)


@check("lease renewed in time: the holder keeps the lock past the first lease", seconds=3)
def t_lease_renew():
    a, b = connect(), connect()
    q(a, "SELECT dlock_try('renewed', lease => '1s')")
    t_end = time.monotonic() + 3
    while time.monotonic() < t_end:
        q(a, "SELECT dlock_renew('renewed')")
        time.sleep(0.3)
    expect(q(b, "SELECT dlock_try('renewed')") is False, "another session got a renewed lock")
    expect(q(a, "SELECT dlock_unlock('renewed')") is True, "holder lost a renewed lock")
    a.close()
    b.close()


@check("lease on a lock released behind dlock's back (pg_advisory_unlock_all): nobody is ended", seconds=1.5)
def t_lease_released_elsewhere():
    a = connect()
    off = log_size()
    q(a, "SELECT dlock_try('released-elsewhere', lease => '300ms')")
    q(a, "SELECT pg_advisory_unlock_all()")
    time.sleep(1.5)
    expect(q(a, "SELECT 1") == 1, "the session was ended")
    expect("released-elsewhere" not in log_since(off), "the reaper acted:\n" + log_since(off))
    a.close()


@check("renew after expiry fails (55P03) even if the reaper is late; the reaper then ends the holder")
def t_renew_expired():
    rp = reaper_pid()
    expect(rp, "no reaper running")
    a, obs = connect(), connect()
    apid = pid_of(a)
    os.kill(rp, signal.SIGSTOP)
    try:
        q(a, "SELECT dlock_try('too-late', lease => '100ms')")
        time.sleep(0.3)
        e = expect_error(psycopg2.errors.LockNotAvailable, "renewed an expired lease",
                         a, "SELECT dlock_renew('too-late', '1 minute')")
        expect("expired" in str(e), str(e))
    finally:
        os.kill(rp, signal.SIGCONT)
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (apid,)) == 0, 10),
           "holder still alive")
    obs.close()


@check("names from another database: shown when the encoding can say them, else NULL with the key; SQL_ASCII")
def t_cross_db():
    c = connect()
    q(c, "DROP DATABASE IF EXISTS dlock_fault_latin1")
    q(c, "CREATE DATABASE dlock_fault_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    l1 = connect("dlock_fault_latin1")
    q(l1, "CREATE EXTENSION dlock")
    q(c, "SELECT dlock_try('日本'), dlock_try('café')")
    rows = {}
    with l1.cursor() as cur:
        cur.execute("SELECT key, name FROM dlock_locks WHERE pid = %s", (pid_of(c),))
        for key, name in cur.fetchall():
            rows[key] = name
    k_jp = q(c, "SELECT dlock_key('日本')")
    k_cafe = q(c, "SELECT dlock_key('café')")
    expect(rows.get(k_cafe) == "café", "café shown as %r" % rows.get(k_cafe))
    expect(k_jp in rows and rows[k_jp] is None, "日本 shown as %r" % rows.get(k_jp))
    l1.close()
    c.close()
    c = connect()
    q(c, "DROP DATABASE dlock_fault_latin1")
    # SQL_ASCII: the bytes as they are, which must be UTF-8
    q(c, "DROP DATABASE IF EXISTS dlock_fault_ascii")
    q(c, "CREATE DATABASE dlock_fault_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    asc = connect("dlock_fault_ascii")
    q(asc, "CREATE EXTENSION dlock")
    expect(q(asc, "SELECT dlock_key(convert_from('\\x636166c3a9'::bytea, 'SQL_ASCII'))") == k_cafe,
           "UTF-8 bytes in SQL_ASCII do not give the UTF-8 key")
    expect_error(psycopg2.errors.CharacterNotInRepertoire, "a name that is not UTF-8 was accepted in SQL_ASCII",
                 asc, "SELECT dlock_key(E'\\xe9')")
    asc.close()
    q(c, "DROP DATABASE dlock_fault_ascii")
    c.close()


# ---- detached locks -------------------------------------------------------

def detached_waiter_queued(obs, name):
    """True once a dlock waiter process is queued for name."""
    return wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_names() WHERE name = %s AND waiting = 'detached'",
                                (name,)) == 1)


def detached_rows(obs, name):
    return q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND scope = 'detached'", (name,))


def no_waiter_processes(obs):
    return wait_until(lambda: q(obs, "SELECT count(*) FROM pg_stat_activity "
                                     "WHERE backend_type = 'dlock waiter'") == 0)


@check("detached: a waiting dlock_acquire is served in queue order, before a later waiter and after an earlier one")
def t_detached_queue_order():
    a, obs = connect(), connect()
    q(a, "SELECT dlock_try('dq')")
    early = Waiter("SELECT dlock_lock('dq', '30s')")
    early.start_and_wait_blocked(obs)
    det = Waiter("SELECT dlock_acquire('dq', '30s', timeout => '30s')")
    det.start()
    expect(detached_waiter_queued(obs, "dq"), "the detached waiter never queued")
    late = Waiter("SELECT dlock_lock('dq', '30s')")
    late.start_and_wait_blocked(obs)
    q(a, "SELECT dlock_unlock('dq')")                      # to the earlier session waiter
    early.join(10)
    expect(early.result is True, "earlier waiter got %r / %r" % (early.result, early.error))
    time.sleep(0.3)
    expect(det.is_alive() and late.is_alive(), "the detached and the later waiter both still wait")
    q(early.conn, "SELECT dlock_unlock('dq')")             # to the detached waiter, not the later one
    det.join(10)
    expect(isinstance(det.result, int) and det.result > 0, "detached waiter got %r / %r" % (det.result, det.error))
    time.sleep(0.3)
    expect(late.is_alive(), "the later waiter jumped the detached holder")
    expect(q(obs, "SELECT dlock_release('dq', %s)", (det.result,)) is True, "release from another session")
    late.join(10)
    expect(late.result is True, "later waiter got %r / %r" % (late.result, late.error))
    q(late.conn, "SELECT dlock_unlock('dq')")
    expect(no_waiter_processes(obs), "a waiter process is left")
    close_all(a, obs, early.conn, det.conn, late.conn)


@check("detached: a client that disconnects while waiting leaves nothing behind", seconds=1.5)
def t_detached_client_gone():
    import subprocess
    a, obs = connect(), connect()
    q(a, "SELECT dlock_try('dgone')")
    script = ("import psycopg2; c = psycopg2.connect(host=%r, port=%d, user='postgres', dbname='postgres', "
              "application_name='dlock-fault-gone'); c.autocommit = True; "
              "c.cursor().execute(\"SELECT dlock_acquire('dgone', '1 hour', timeout => '1 hour')\")"
              % ("/tmp/dlock-%d" % ARGS.port, ARGS.port))
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        expect(detached_waiter_queued(obs, "dgone"), "the detached waiter never queued")
        os.kill(child.pid, signal.SIGKILL)                # the client's socket closes
    finally:
        child.wait()
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM pg_stat_activity "
                                     "WHERE application_name = 'dlock-fault-gone'") == 0, timeout=10),
           "the backend of the vanished client is still there")
    expect(no_waiter_processes(obs), "a waiter process is left")
    expect(q(obs, "SELECT count(*) FROM dlock_names() WHERE name = 'dgone' AND waiting IS NOT NULL") == 0,
           "a wait is left")
    q(a, "SELECT dlock_unlock('dgone')")
    time.sleep(0.3)
    expect(detached_rows(obs, "dgone") == 0, "the lock went to the vanished client")
    expect(q(obs, "SELECT pg_try_advisory_lock(dlock_key('dgone'))") is True, "the name is not free")
    q(obs, "SELECT pg_advisory_unlock(dlock_key('dgone'))")
    close_all(a, obs)


@check("detached: granted and cancelled in one instant (caller stopped): an error, and no lock kept; "
       "dlock_stats counts the cancel, not an acquisition nor its end")
def t_detached_grant_then_cancel():
    a, obs = connect(), connect()
    q(obs, "SELECT dlock_stats_reset('dgc')")
    q(a, "SELECT dlock_try('dgc')")
    w = Waiter("SELECT dlock_acquire('dgc', '1 hour', timeout => '1 min')")
    w.start()
    expect(detached_waiter_queued(obs, "dgc"), "the detached waiter never queued")
    expect(wait_until(lambda: q(obs, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                                (w.pid,))), "the caller never waited for its ticket")
    with stopped(w.pid):
        q(a, "SELECT dlock_unlock('dgc')")                 # granted to the waiter process
        expect(wait_until(lambda: detached_rows(obs, "dgc") == 1 and
                          q(obs, "SELECT bool_and(granted) FROM dlock_locks WHERE name = 'dgc'")),
               "the waiter process did not get the lock")
        q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))  # the caller is cancelled before it runs
    w.join(10)
    expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "caller got %r / %r" % (w.result, w.error))
    expect(wait_until(lambda: detached_rows(obs, "dgc") == 0, timeout=5), "the lock is kept after the error")
    expect(no_waiter_processes(obs), "a waiter process is left")
    expect(q(obs, "SELECT pg_try_advisory_lock(dlock_key('dgc'))") is True, "the name is not free")
    q(obs, "SELECT pg_advisory_unlock(dlock_key('dgc'))")
    # a's session hold (taken and released); the caller's cancel; the
    # waiter's hold, never the caller's, neither acquired nor ended
    got = q(obs, "SELECT ARRAY[session_acquisitions, detached_acquisitions, cancels, released] "
                 "FROM dlock_stats WHERE name = 'dgc' AND mode = 'exclusive'")
    expect(got == [1, 0, 1, 1], "dlock_stats (session, detached, cancels, released): %r" % (got,))
    close_all(a, obs, w.conn)


@check("detached: a waiting acquisition sleeps in the lock manager's queue (wait event Lock/advisory), no polling")
def t_detached_waits_in_queue():
    a, obs = connect(), connect()
    q(a, "SELECT dlock_try('dsleep')")
    w = Waiter("SELECT dlock_acquire('dsleep', '30s', timeout => '30s')")
    w.start()
    expect(detached_waiter_queued(obs, "dsleep"), "the detached waiter never queued")
    ev = q(obs, "SELECT string_agg(backend_type || ':' || wait_event_type || '/' || wait_event, ' ' "
                "ORDER BY backend_type) FROM pg_stat_activity WHERE pid = %s "
                "OR pid IN (SELECT pid FROM dlock_names() WHERE name = 'dsleep' AND waiting = 'detached')",
           (w.pid,))
    expect(ev == "client backend:Lock/advisory dlock waiter:Lock/advisory",
           "caller and waiter should both sleep on a lock: %r" % ev)
    t0 = time.monotonic()
    q(a, "SELECT dlock_unlock('dsleep')")
    w.join(10)
    expect(isinstance(w.result, int), "got %r / %r" % (w.result, w.error))
    expect(time.monotonic() - t0 < 0.5, "granted %.3f s after the release" % (time.monotonic() - t0))
    q(obs, "SELECT dlock_release('dsleep', %s)", (w.result,))
    close_all(a, obs, w.conn)


@check("detached: a lease that runs out is released within a second, logged with name, token and role")
def t_detached_lease_bound():
    c, obs = connect(), connect()
    off = log_size()
    tok = q(c, "SELECT dlock_acquire('dbound', '300 ms')")
    expires = q(obs, "SELECT extract(epoch FROM lease_expires) FROM dlock_locks WHERE name = 'dbound'")
    expect(wait_until(lambda: detached_rows(obs, "dbound") == 0, timeout=5, step=0.005), "never released")
    late = time.time() - float(expires)
    expect(late < 1.0, "released %.3f s after the expiry" % late)
    expect(q(obs, "SELECT pg_try_advisory_lock(dlock_key('dbound'))") is True, "the name is not free")
    q(obs, "SELECT pg_advisory_unlock(dlock_key('dbound'))")
    expect(wait_until(lambda: 'lease of detached lock "dbound" expired, released it' in log_since(off), timeout=5),
           "no log line")
    log = log_since(off)
    expect(("fencing token %d" % tok) in log and 'acquired by role "postgres"' in log,
           "the log line lacks the token or the role: %r" % log[-400:])
    close_all(c, obs)


@check("detached: a shared acquisition does not jump a queued exclusive waiter")
def t_detached_shared_no_jump():
    a, obs = connect(), connect()
    s1 = q(a, "SELECT dlock_acquire('dshare', '30s', shared => true)")
    x = Waiter("SELECT dlock_lock('dshare', '30s')")
    x.start()
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks l WHERE NOT granted AND locktype = 'advisory' "
                                     "AND ((classid::bigint << 32) | objid::bigint) = dlock_key('dshare')") == 1),
           "the exclusive waiter never queued")
    expect(q(obs, "SELECT dlock_acquire('dshare', '30s', shared => true)") is None,
           "a second shared holder jumped the queued exclusive waiter")
    expect(q(obs, "SELECT dlock_try('dshare', shared => true)") is False, "so would a session (as the lock manager)")
    expect(q(a, "SELECT dlock_release('dshare', %s)", (s1,)) is True, "release")
    x.join(10)
    expect(x.result is True, "the exclusive waiter got %r / %r" % (x.result, x.error))
    q(x.conn, "SELECT dlock_unlock('dshare')")
    close_all(a, obs, x.conn)


# ---- the hardening after 1.4: each check reproduces a way 1.4 broke a promise ----

def holder_pid():
    return process_pid("dlock lock holder")


def postmaster_pid():
    with open("/tmp/dlock-%d/data/postmaster.pid" % ARGS.port) as f:
        return int(f.readline())


def alive(obs, pid):
    return q(obs, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)) == 1


@check("lease, then DISCARD ALL and the same key taken afresh: the session is not ended, the view drops the old hold", seconds=5)
def t_lease_discard_relock():
    for release in ("DISCARD ALL", "SELECT pg_advisory_unlock_all()"):
        a, obs = connect(), connect()
        apid = pid_of(a)
        q(a, "SELECT dlock_lock('discarded', lease => '1s')")
        q(a, release)
        q(a, "SELECT pg_advisory_lock(dlock_key('discarded'))")
        time.sleep(2.5)                                   # the old lease is long over
        expect(alive(obs, apid), "%s: the session was ended over a lease it no longer had" % release)
        row = q(obs, "SELECT row(name IS NULL, lease_expires IS NULL, token IS NULL)::text FROM dlock_locks "
                     "WHERE pid = %s", (apid,))
        expect(row == "(t,t,t)", "%s: the view shows the new hold as the old one: %r" % (release, row))
        expect(q(a, "SELECT 1") == 1, "%s: the session cannot run a statement" % release)
        close_all(a, obs)


@check("lease, session scope, with a temporary table: ended once, its temporary tables dropped", seconds=1)
def t_lease_temp_tables():
    off = log_size()
    a, obs = connect(), connect()
    apid = pid_of(a)
    q(a, "CREATE TEMP TABLE lease_scratch (n int)")
    q(a, "SELECT dlock_lock('temp-lease', lease => '1s')")
    expect(wait_until(lambda: not alive(obs, apid), 15), "the holder was not ended")
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM pg_class WHERE relname = 'lease_scratch'") == 0, 10),
           "its temporary table was left behind")
    log = log_since(off)
    expect("cannot commit after the lease" not in log, "a second FATAL at exit:\n%s" % log)
    close_all(a, obs)


@check("lock holder stalled: dlock_acquire, dlock_extend and dlock_release can be cancelled; nothing is kept", seconds=1)
def t_holder_stalled_cancel():
    obs = connect()
    a = connect()
    tok = q(a, "SELECT dlock_acquire('stalled-keep', '1 min')")
    hpid = holder_pid()
    calls = ["SELECT dlock_acquire('stalled-new', '1 min')",
             "SELECT dlock_extend('stalled-keep', %d, '1 min')" % tok,
             "SELECT dlock_release('stalled-keep', %d)" % tok]
    with stopped(hpid):
        for sql in calls:
            w = Waiter(sql)
            w.start()
            time.sleep(0.3)
            t0 = time.monotonic()
            q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))
            w.join(5)
            expect(not w.is_alive(), "%s: not cancelled while the holder is stopped" % sql)
            expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "%s got %r / %r" % (sql, w.result, w.error))
            expect(time.monotonic() - t0 < 2, "%s: the cancel took %.1fs" % (sql, time.monotonic() - t0))
            w.conn.close()
    # the abandoned acquisition was not kept; the one held before still is
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'stalled-new'") == 0, 5),
           "an acquisition whose caller was cancelled is held")
    expect(q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'stalled-keep'") == 1, "the other lock is gone")
    q(a, "SELECT dlock_release('stalled-keep', %s)", (tok,))
    close_all(a, obs)


@check("lock holder stalled: dlock_acquire's timeout bounds the wait for its answer (NULL at the deadline)")
def t_holder_stalled_timeout():
    obs = connect()
    with stopped(holder_pid()):
        w = Waiter("SELECT dlock_acquire('stalled-timeout', '1 min', timeout => '500ms') IS NULL")
        w.start()
        w.join(3)
        expect(not w.is_alive(), "the timeout did not end the wait for the stopped holder")
        expect(w.result is True, "got %r / %r" % (w.result, w.error))
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'stalled-timeout'") == 0, 5),
           "an acquisition that timed out is held")
    close_all(obs, w.conn)


@check("lock holder stalled: a rollback after dlock_acquire and a terminate do not wait for it; the lock is released")
def t_holder_stalled_undo():
    obs = connect()
    b = connect()
    b.autocommit = False
    q(b, "SELECT dlock_acquire('stalled-undo', '1 min')")
    t = connect()
    tpid = pid_of(t)
    hpid = holder_pid()
    with stopped(hpid):
        rb = threading.Thread(target=b.rollback, daemon=True)
        rb.start()
        rb.join(1.0)
        expect(not rb.is_alive(), "the rollback waits for the stopped holder")
        w = Waiter("SELECT dlock_acquire('stalled-term', '1 min')", conn=t)
        w.start()
        time.sleep(0.3)
        q(obs, "SELECT pg_terminate_backend(%s)", (tpid,))
        w.join(5)
        expect(not w.is_alive(), "not terminated while the holder is stopped")
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name IN ('stalled-undo', 'stalled-term')") == 0, 5),
           "a rolled-back or abandoned acquisition is still held")
    close_all(b, obs)


@check("a rolled-back dlock_acquire is released before the same session's next one, also with the holder busy")
def t_undo_before_next():
    stop = threading.Event()

    def busy():
        c = connect()
        while not stop.is_set():
            t = q(c, "SELECT dlock_acquire('undo-busy-' || pg_backend_pid(), '10s')")
            q(c, "SELECT dlock_release('undo-busy-' || pg_backend_pid(), %s)", (t,))
        c.close()
    others = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
    for t in others:
        t.start()
    a = connect()
    a.autocommit = False
    misses = 0
    for _ in range(150):
        q(a, "SELECT dlock_acquire('undo-next', '10s')")
        a.rollback()
        tok = q(a, "SELECT dlock_acquire('undo-next', '10s')")
        a.commit()
        if tok is None:
            misses += 1
        else:
            q(a, "SELECT dlock_release('undo-next', %s)", (tok,))
            a.commit()
    stop.set()
    for t in others:
        t.join(10)
    a.close()
    expect(misses == 0, "%d of 150 acquisitions found the rolled-back one still held" % misses)


@check("a waited dlock_acquire cancelled while its waiter is stopped (and granted meanwhile): the session's next try waits for the waiter to let go, and gets the lock")
def t_abandoned_before_next():
    obs, a, b = connect(), connect(), connect()
    tb = q(b, "SELECT dlock_acquire('gave-up', '30s')")
    w = Waiter("SELECT dlock_acquire('gave-up', '30s', timeout => '20s')", conn=a)
    w.start()
    expect(detached_waiter_queued(obs, "gave-up"), "the acquisition never waited")
    wpid = q(obs, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock waiter'")
    with stopped(wpid):
        q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))
        w.join(10)
        expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "the cancelled call got %r / %r" % (w.result, w.error))
        # granted to the stopped waiter, for a caller that gave up
        q(b, "SELECT dlock_release('gave-up', %s)", (tb,))
        retry = Waiter("SELECT dlock_acquire('gave-up', '30s')", conn=a)     # try once
        retry.start()
        time.sleep(0.5)
        expect(retry.is_alive(), "the next try did not wait for the waiter that gave up: %r" % (retry.result,))
    retry.join(10)
    expect(retry.result is not None, "the next try met the given-up hold: %r / %r" % (retry.result, retry.error))
    if retry.result is not None:
        q(a, "SELECT dlock_release('gave-up', %s)", (retry.result,))
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'gave-up'") == 0, 5),
           "something of the name is left")
    close_all(a, b, obs)


@check("postmaster slow to start waiters: cancelled waited acquisitions leak no waiter block", seconds=15.5)
def t_waiter_start_cancel():
    obs, a = connect(), connect()
    tok = q(a, "SELECT dlock_acquire('slow-start', '1 min')")
    nworkers = int(q(obs, "SHOW max_worker_processes"))
    pm = postmaster_pid()
    for _ in range(nworkers + 2):
        w = Waiter("SELECT dlock_acquire('slow-start', '1 min', timeout => '30s')")
        with stopped(pm):
            w.start()
            time.sleep(0.2)
            q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))
            w.join(5)
            expect(not w.is_alive(), "not cancelled while the postmaster is stopped")
            time.sleep(1.2)                               # longer than 1.4 waited for the postmaster
        w.conn.close()
    time.sleep(0.5)
    q(a, "SELECT dlock_release('slow-start', %s)", (tok,))
    b = connect()
    tok2 = q(b, "SELECT dlock_acquire('slow-start-2', '1 min')")
    w = Waiter("SELECT dlock_acquire('slow-start-2', '1 min', timeout => '30s')")
    w.start()
    time.sleep(0.5)
    q(b, "SELECT dlock_release('slow-start-2', %s)", (tok2,))
    w.join(15)
    expect(w.error is None and w.result is not None, "a waited acquisition fails afterwards: %r / %r" % (w.result, w.error))
    q(w.conn, "SELECT dlock_release('slow-start-2', %s)", (w.result,))
    close_all(a, b, obs, w.conn)


@check("grant, deadline and a cancel in one instant (waiter stopped): the cancel is not lost, the lock not kept")
def t_grant_deadline_cancel():
    a, obs, w = held_and_awaited("grant-deadline-cancel", "SELECT dlock_lock('grant-deadline-cancel', '300ms')")
    with stopped(w.pid):
        q(a, "SELECT dlock_unlock('grant-deadline-cancel')")  # granted to the stopped waiter
        time.sleep(0.6)                                   # its deadline passes
        q(obs, "SELECT pg_cancel_backend(%s)", (w.pid,))  # and a real cancel comes
    w.join(10)
    expect(isinstance(w.error, psycopg2.errors.QueryCanceled), "waiter got %r / %r" % (w.result, w.error))
    expect(q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (w.pid,)) == 0,
           "the cancelled waiter still holds the lock")
    close_all(a, obs, w.conn)


@check("reaper stopped: a COMMIT after the lease ran out commits nothing, not even through postgres_fdw", seconds=1.5)
def t_lease_fdw_commit():
    """postgres_fdw commits its remote transaction in a pre-commit callback
    of its own, registered (and so run) after dlock's when the session used
    dlock first: the COMMIT must be refused before it runs."""
    obs = connect()
    for sql in ("CREATE EXTENSION IF NOT EXISTS postgres_fdw",
                "DROP SERVER IF EXISTS dlock_loop CASCADE",
                "CREATE SERVER dlock_loop FOREIGN DATA WRAPPER postgres_fdw "
                "OPTIONS (host '/tmp/dlock-%d', port '%d', dbname 'postgres')" % (ARGS.port, ARGS.port),
                "CREATE USER MAPPING FOR postgres SERVER dlock_loop OPTIONS (user 'postgres')",
                "DROP TABLE IF EXISTS fdw_remote, fdw_local",
                "DROP FUNCTION IF EXISTS fdw_slow()",
                "CREATE TABLE fdw_remote (n int)", "CREATE TABLE fdw_local (n int)",
                "CREATE FOREIGN TABLE fdw_far (n int) SERVER dlock_loop OPTIONS (table_name 'fdw_remote')"):
        q(obs, sql)
    a = connect()
    apid = pid_of(a)
    with stopped(reaper_pid()):
        q(a, "SELECT dlock_try('fdw-job', lease => '300ms')")
        a.autocommit = False
        q(a, "INSERT INTO fdw_far VALUES (1)")      # postgres_fdw registers its callbacks now
        q(a, "INSERT INTO fdw_local VALUES (1)")
        time.sleep(0.6)
        expect_commit_fails(a, "committed after the lease ran out", rollback=False)
        expect(q(obs, "SELECT count(*) FROM fdw_local") == 0, "the local write is visible")
        expect(q(obs, "SELECT count(*) FROM fdw_remote") == 0,
               "the write through postgres_fdw was committed after the lease ran out")
        # the refused COMMIT ended the transaction, as any refused commit does
        expect(q(a, "SELECT 1") == 1, "the session is not out of its transaction")
        a.rollback()
        # the lease runs out after the COMMIT statement began, in a deferred
        # trigger, before the pre-commit steps: dlock's still comes first
        q(obs, "CREATE FUNCTION fdw_slow() RETURNS trigger LANGUAGE plpgsql "
               "AS $$ BEGIN PERFORM pg_sleep(0.6); RETURN NULL; END $$")
        q(obs, "CREATE CONSTRAINT TRIGGER fdw_slow AFTER INSERT ON fdw_local "
               "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fdw_slow()")
        a2 = connect()
        a2pid = pid_of(a2)
        q(a2, "SELECT dlock_try('fdw-job2', lease => '300ms')")
        a2.autocommit = False
        q(a2, "INSERT INTO fdw_far VALUES (2)")
        q(a2, "INSERT INTO fdw_local VALUES (2)")
        expect_commit_fails(a2, "committed after the lease ran out in a deferred trigger")
        expect(q(obs, "SELECT count(*) FROM fdw_remote") == 0,
               "the write through postgres_fdw was committed after the lease ran out in a deferred trigger")
    # the reaper, once it runs again, ends the sessions over their leases
    expect(wait_until(lambda: not alive(obs, apid) and not alive(obs, a2pid), 10),
           "a session past its lease was not ended")
    for sql in ("DROP SERVER dlock_loop CASCADE", "DROP TABLE fdw_remote, fdw_local",
                "DROP FUNCTION fdw_slow()", "DROP EXTENSION postgres_fdw"):
        q(obs, sql)
    close_all(a, a2, obs)


@check("a leased hold released behind dlock's back, then past its lease: only that transaction's commit is refused, the session goes on and is not ended for a raw lock of the key", seconds=3)
def t_released_then_past_lease():
    obs = connect()
    for release in ("pg_advisory_unlock_all()", "pg_advisory_unlock(dlock_key('rel-x'))"):
        a = connect()
        apid = pid_of(a)
        q(a, "SELECT dlock_try('rel-x', lease => '500ms')")
        a.autocommit = False
        q(a, "SELECT " + release)
        time.sleep(0.7)
        expect(q(a, "SELECT dlock_try('rel-y')") is True, "%s: another name was refused" % release)
        expect_commit_fails(a, "%s: committed a transaction that released the hold past its lease" % release)
        a.autocommit = True
        # 1.4 and the first hardening: every later commit refused, for good
        expect(q(a, "SELECT 1") == 1, "%s: a plain statement after it is refused" % release)
        expect(q(a, "SELECT dlock_try('rel-z')") is True, "%s: a new name after it is refused" % release)
        expect(q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (4, 5) "
                      "AND pid = %s", (apid,)) == 0, "%s: a lease marker is left" % release)
        # the same key taken afresh, raw; the reaper makes a pass (another lease runs out)
        q(a, "SELECT pg_advisory_lock(dlock_key('rel-x'))")
        b = connect()
        bpid = pid_of(b)
        q(b, "SELECT dlock_try('rel-wake', lease => '300ms')")
        expect(wait_until(lambda: not alive(obs, bpid), 5), "the reaper did not end the other lease")
        time.sleep(0.5)
        expect(alive(obs, apid), "%s: the session was ended over the old lease, for a raw lock of the key" % release)
        close_all(a, b)
    obs.close()


@check("reaper stopped: a wait that began before the session's lease ran out and is granted after it fails, and keeps nothing", seconds=1)
def t_wait_past_lease():
    obs, a, b = connect(), connect(), connect()
    apid = pid_of(a)
    q(b, "SELECT dlock_try('wl-b')")
    with stopped(reaper_pid()):
        q(a, "SELECT dlock_try('wl-a', lease => '300ms')")
        w = Waiter("SELECT dlock_lock('wl-b', '5s')", conn=a)
        w.start()
        time.sleep(0.8)
        q(b, "SELECT dlock_unlock('wl-b')")
        w.join(10)
        expect(isinstance(w.error, psycopg2.errors.LockNotAvailable), "the wait got %r / %r" % (w.result, w.error))
        expect(q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
                      "AND pid = %s AND objid = (dlock_key('wl-b') & x'ffffffff'::bigint)::oid", (apid,)) == 0,
               "the lock granted past the lease is kept")
    expect(wait_until(lambda: not alive(obs, apid), 10), "the session past its lease was not ended")
    close_all(a, b, obs)


@check("reaper stopped: past its lease a session takes no other name or mode, and cannot commit after pg_advisory_unlock_all", seconds=1.5)
def t_expired_takes_nothing():
    obs, a = connect(), connect()
    with stopped(reaper_pid()):
        q(a, "SELECT dlock_try('past-lease', shared => true, lease => '300ms')")
        time.sleep(0.6)
        for sql in ("SELECT dlock_try('past-lease')", "SELECT dlock_try('past-other', lease => '1h')",
                    "SELECT dlock_try_xact('past-other')"):
            expect_error(psycopg2.errors.LockNotAvailable, "%s: taken after the lease ran out" % sql, a, sql)
        expect(q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'past-other'") == 0, "past-other is held")
        q(obs, "CREATE TABLE IF NOT EXISTS past_lease_t (n int)")
        b = connect()
        q(b, "SELECT dlock_try('past-commit', lease => '300ms')")
        b.autocommit = False
        q(b, "INSERT INTO past_lease_t VALUES (1)")
        time.sleep(0.6)
        q(b, "SELECT pg_advisory_unlock_all()")
        expect_commit_fails(b, "committed after the lease ran out (released behind dlock's back)")
        expect(q(obs, "SELECT count(*) FROM past_lease_t") == 0, "the write of a holder past its lease is visible")
        b.close()
    q(obs, "DROP TABLE past_lease_t")
    close_all(a, obs)


@check("one session cannot fill the lock table through dlock: dlock.max_held_locks, 53400 with a hint")
def t_held_limit():
    c = connect()
    q(c, "SET dlock.max_held_locks = 100")
    q(c, "SELECT dlock_try('many-' || g) FROM generate_series(1, 100) g")
    e = expect_error(psycopg2.errors.ConfigurationLimitExceeded, "the 101st name was taken",
                     c, "SELECT dlock_try('many-101')")
    expect(e.diag.message_hint and "dlock.max_held_locks" in e.diag.message_hint, "hint: %r" % e.diag.message_hint)
    expect(q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()") == 100,
           "the refused name is held")
    expect(q(c, "SELECT dlock_try('many-1')") is True, "a name already held cannot be taken again")
    q(c, "SELECT dlock_unlock_all()")
    q(c, "RESET dlock.max_held_locks")
    expect_error(psycopg2.errors.ConfigurationLimitExceeded, "a million names were taken",
                 c, "SELECT dlock_try('auto-' || g) FROM generate_series(1, 1000000) g")
    # session locks taken before the refusal stay, as pg_advisory_lock's do
    n = q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
    expect(n > 100 and q(c, "SELECT dlock_unlock_all()") == n, "%r held, not all named" % n)
    # a new connection can still start
    d = connect()
    q(d, "SELECT 1")
    close_all(c, d)


@check("one role cannot take every detached lock: dlock.max_detached_locks_per_role, 53400 with a hint")
def t_role_limit():
    admin = connect()
    limit = int(q(admin, "SHOW dlock.max_detached_locks")) // 2
    q(admin, "DROP ROLE IF EXISTS dlock_greedy")
    q(admin, "DROP ROLE IF EXISTS dlock_greedy_a")
    q(admin, "DROP ROLE IF EXISTS dlock_greedy_b")
    q(admin, "CREATE ROLE dlock_greedy LOGIN")
    q(admin, "CREATE ROLE dlock_greedy_a")
    q(admin, "CREATE ROLE dlock_greedy_b")
    q(admin, "GRANT dlock_greedy_a, dlock_greedy_b TO dlock_greedy")
    c = connect(user="dlock_greedy")
    # half under one role it may set, then the other: one session's user all the same
    q(c, "SET ROLE dlock_greedy_a")
    q(c, "SELECT dlock_acquire('greedy-' || g, '1 min') FROM generate_series(1, %s) g", (limit // 2,))
    q(c, "SET ROLE dlock_greedy_b")
    q(c, "SELECT dlock_acquire('greedy-' || g, '1 min') FROM generate_series(%s, %s) g", (limit // 2 + 1, limit))
    e = expect_error(psycopg2.errors.ConfigurationLimitExceeded, "the role took more than half (SET ROLE in between)",
                     c, "SELECT dlock_acquire('greedy-more', '1 min')")
    expect("dlock.max_detached_locks_per_role" in (e.diag.message_hint or ""), "hint: %r" % e.diag.message_hint)
    expect("dlock_greedy" in e.diag.message_primary, "message: %r" % e.diag.message_primary)
    q(c, "RESET ROLE")
    c.close()
    c = admin
    other = connect()
    tok = q(other, "SELECT dlock_acquire('other-role', '1 min')")
    expect(tok is not None, "another role cannot acquire")
    q(other, "SELECT dlock_release('other-role', %s)", (tok,))
    q(c, "SELECT dlock_release(name, token) FROM dlock_locks WHERE name LIKE 'greedy-%%' AND scope = 'detached'")
    q(c, "DROP ROLE dlock_greedy")
    q(c, "DROP ROLE dlock_greedy_a")
    q(c, "DROP ROLE dlock_greedy_b")
    close_all(c, other)


@check("one role cannot take every background worker slot with waited detached locks: dlock.max_detached_waiters_per_role, 53400 with a hint")
def t_role_waiters():
    c, obs = connect(), connect()
    q(c, "ALTER SYSTEM SET dlock.max_detached_waiters_per_role = 2")
    q(c, "SELECT pg_reload_conf()")
    wait_until(lambda: q(connect(), "SHOW dlock.max_detached_waiters_per_role") == "2", 5)
    q(c, "DROP ROLE IF EXISTS dlock_waitful")
    q(c, "CREATE ROLE dlock_waitful LOGIN")
    q(c, "GRANT SELECT ON dlock_locks TO dlock_waitful")
    busy = [q(c, "SELECT dlock_acquire('waitful-%d', '1 min')" % i) for i in range(4)]
    waits = [Waiter("SELECT dlock_acquire('waitful-%d', '1 min', timeout => '30s')" % i,
                    conn=connect(user="dlock_waitful")) for i in range(2)]
    for w in waits:
        w.start()
    for i in range(2):
        expect(detached_waiter_queued(obs, "waitful-%d" % i), "waited acquisition %d never waited" % i)
    third = connect(user="dlock_waitful")
    e = expect_error(psycopg2.errors.ConfigurationLimitExceeded, "a third waited acquisition of the role was started",
                     third, "SELECT dlock_acquire('waitful-2', '1 min', timeout => '30s')")
    expect("dlock.max_detached_waiters_per_role" in (e.diag.message_hint or ""), "hint: %r" % e.diag.message_hint)
    expect(q(obs, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dlock waiter'") == 2,
           "the refused acquisition left a waiter behind")
    # another role still waits
    other = Waiter("SELECT dlock_acquire('waitful-3', '1 min', timeout => '30s')")
    other.start()
    expect(detached_waiter_queued(obs, "waitful-3"), "another role's waited acquisition was refused")
    for i, t in enumerate(busy):
        q(c, "SELECT dlock_release('waitful-%d', %s)" % (i, t))
    for w in waits + [other]:
        w.join(10)
        expect(w.result is not None, "a waited acquisition got %r / %r" % (w.result, w.error))
    q(c, "SELECT dlock_release(name, token) FROM dlock_locks WHERE name LIKE 'waitful-%%' AND scope = 'detached' AND granted")
    q(c, "ALTER SYSTEM RESET dlock.max_detached_waiters_per_role")
    q(c, "SELECT pg_reload_conf()")
    for w in waits + [other]:
        w.conn.close()
    q(c, "REVOKE SELECT ON dlock_locks FROM dlock_waitful")
    expect(wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name LIKE 'waitful-%%'") == 0, 5),
           "something is left")
    q(c, "DROP ROLE dlock_waitful")
    close_all(c, obs, third)


def share_of_checks(checks):
    """The checks this run makes, in their order.  test/run gives each major
    it tests a share (DLOCK_FAULT_SHARE=K/N, K counted from 0), so that one
    test/run makes every check once, spread over the majors; without it, or
    with DLOCK_FAULT_ALL=1, every check runs.  The checks are dealt out by
    their seconds, the longest first, each to the share with the fewest
    seconds so far (the first of equals): the same split on every major.
    The every_major checks are in every share."""
    spec = os.environ.get("DLOCK_FAULT_SHARE", "")
    if os.environ.get("DLOCK_FAULT_ALL") == "1" or not spec:
        return checks, 0, 1
    m = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        sys.exit("DLOCK_FAULT_SHARE must be K/N with 0 <= K < N, not %r" % spec)
    share, shares = int(m.group(1)), int(m.group(2))
    tenths = [0] * shares                                  # whole tenths of a second: no rounding
    mine = set()
    for fn in sorted(checks, key=lambda fn: -fn.seconds):  # stable: equals in list order
        if fn.every_major:
            mine.add(fn)
            continue
        k = tenths.index(min(tenths))
        tenths[k] += round(fn.seconds * 10)
        if k == share:
            mine.add(fn)
    return [fn for fn in checks if fn in mine], share, shares


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--only", help="only the checks whose function name matches this regular expression")
    ARGS = ap.parse_args()
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    c.close()
    checks = [t_driver, t_wait_is_queue, t_wait_errors, t_grant_then_cancel, t_grant_at_deadline,
              t_deadline_and_statement_timeout, t_holder_terminated, t_waiter_terminated, t_leader_election, t_several_holder_stalled,
              t_semaphore_queue, t_semaphore_deadlock, t_semaphore_deadlock_own_share,
              t_semaphore_no_false_deadlock,
              t_deadlock_named, t_summary, t_lease_session, t_lease_xact_busy, t_lease_xact_idle, t_lease_renew, t_lease_released_elsewhere, t_renew_expired, t_expired_cannot_commit,
              t_cross_db, t_detached_queue_order, t_detached_client_gone, t_detached_grant_then_cancel,
              t_detached_waits_in_queue, t_detached_lease_bound, t_detached_shared_no_jump,
              t_lease_discard_relock, t_lease_temp_tables, t_lease_fdw_commit,
              t_released_then_past_lease, t_wait_past_lease, t_holder_stalled_cancel, t_holder_stalled_timeout,
              t_holder_stalled_undo,
              t_waiter_start_cancel, t_undo_before_next, t_abandoned_before_next, t_grant_deadline_cancel, t_expired_takes_nothing,
              t_held_limit, t_role_limit, t_role_waiters,
              t_observers_backend, t_observers_leader, t_observers_detached, t_observers_databases]
    if ARGS.only:
        checks = [fn for fn in checks if re.search(ARGS.only, fn.fn_name)]
    mine, share, shares = share_of_checks(checks)
    if shares > 1:
        print("# share %d of %d: %d of the %d checks, about %g of %g s (DLOCK_FAULT_ALL=1: all of them)"
              % (share + 1, shares, len(mine), len(checks), sum(fn.seconds for fn in mine),
                 sum(fn.seconds for fn in checks)), flush=True)
    for fn in mine:
        fn()
    print("# all fault tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
