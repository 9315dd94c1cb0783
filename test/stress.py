#!/usr/bin/env python3
"""test/stress.py: many sessions taking and releasing a few names at random.

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/stress.py --port 54321 [--seconds 10] [--workers 8] [--seed N]
Prints "ok - ..." / "not ok - ..." lines like test/fault.py, whose helpers it
uses, then "# all stress tests ran".

Workers (one connection each) pick a name out of four and an operation:
session or transaction scope, exclusive or shared, try or timed wait or an
unbounded wait, re-entry, a savepoint rolled back, two names in random order
(deadlocks are possible and must be detected), locks with long leases; one
extra worker keeps overstaying short leases on transaction locks, so the
reaper cancels it again and again under the others' feet.  While it holds a
name, a worker records that in tables, and the tables enforce the rules:

  stress_inside (name PRIMARY KEY): an exclusive holder inserts its row, so a
      second exclusive holder at the same time is a unique violation;
  stress_shared: a shared holder's row; an exclusive holder must see none
      for its name, and a shared holder must see no stress_inside row;
  stress_log: every exclusive hold's token, in hold order (a sequence): per
      name the tokens must increase.

Rows of transaction-scope holds are written in the same transaction, so a
holder cancelled by the reaper takes its rows with it.  The checks are about
correctness, not speed: the numbers of operations are printed, not judged
(but every kind of operation must have happened).
"""
import argparse
import contextlib
import os
import random
import sys
import threading
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402
from fault import check, expect, q, connect, RESULTS  # noqa: E402

NAMES = ["stress-a", "stress-b", "stress-c", "stress-d"]
STATS = {}
STATS_LOCK = threading.Lock()
VIOLATIONS = []
PIDS = set()


def count(what, n=1):
    with STATS_LOCK:
        STATS[what] = STATS.get(what, 0) + n


def violation(what):
    with STATS_LOCK:
        VIOLATIONS.append(what)


class Worker(threading.Thread):
    def __init__(self, n, seconds, seed, lease_abuser=False):
        super().__init__(daemon=True)
        self.n = n
        self.rnd = random.Random(seed * 1000 + n)
        self.deadline = time.monotonic() + seconds
        self.lease_abuser = lease_abuser
        self.error = None
        self.conn = None

    def reconnect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        self.conn = connect(app="dlock-stress-%d" % self.n)
        self.pid = q(self.conn, "SELECT pg_backend_pid()")
        with STATS_LOCK:
            PIDS.add(self.pid)

    def x(self, sql, params=None):
        return q(self.conn, sql, params)

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN ... COMMIT, or ROLLBACK on an error (which goes on)."""
        self.conn.autocommit = False
        try:
            yield
            self.conn.commit()
        except BaseException:
            if not self.conn.closed:
                self.conn.rollback()
            raise
        finally:
            if not self.conn.closed:
                self.conn.autocommit = True

    # ---- what a holder does while it holds ----

    def enter_exclusive(self, name):
        """Record an exclusive hold: its row, its token in hold order."""
        tok = self.x("SELECT dlock_token(%s)", (name,))
        try:
            self.x("INSERT INTO stress_inside VALUES (%s, %s, %s)", (name, self.pid, tok))
        except psycopg2.errors.UniqueViolation:
            violation("two exclusive holders of %s (pid %d)" % (name, self.pid))
            raise
        if self.x("SELECT count(*) FROM stress_shared WHERE name = %s", (name,)) != 0:
            violation("exclusive hold of %s while shared holders are inside" % name)
        self.x("INSERT INTO stress_log (name, token) VALUES (%s, %s)", (name, tok))

    def inside_exclusive(self, name):
        self.enter_exclusive(name)
        self.pause()
        self.x("DELETE FROM stress_inside WHERE name = %s", (name,))

    def inside_shared(self, name):
        self.x("INSERT INTO stress_shared VALUES (%s, %s)", (name, self.pid))
        if self.x("SELECT count(*) FROM stress_inside WHERE name = %s", (name,)) != 0:
            violation("shared hold of %s while an exclusive holder is inside" % name)
        self.pause()
        self.x("DELETE FROM stress_shared WHERE name = %s AND pid = %s", (name, self.pid))

    def pause(self):
        if self.rnd.random() < 0.3:
            time.sleep(self.rnd.random() * 0.005)

    def timeout(self):
        return self.rnd.choice(["0", "1ms", "20ms", "100ms"])

    # ---- operations ----

    def op_session(self, name):
        shared = self.rnd.random() < 0.3
        lease = self.rnd.choice([None, "1 min"])
        how = self.rnd.choice(["try", "wait", "forever"])
        if how == "try":
            ok = self.x("SELECT dlock_try(%s, %s, %s)", (name, shared, lease))
        elif how == "wait":
            ok = self.x("SELECT dlock_lock(%s, %s, %s, %s)", (name, self.timeout(), shared, lease))
        else:
            ok = self.x("SELECT dlock_lock(%s)", (name,)) if not shared else \
                self.x("SELECT dlock_lock(%s, shared => true)", (name,))
        count("session %s %s" % ("shared" if shared else "exclusive", "taken" if ok else "missed"))
        if not ok:
            return
        if self.rnd.random() < 0.2:   # re-entry: two holds, two unlocks
            expect(self.x("SELECT dlock_try(%s, %s)", (name, shared)) is True, "re-entry refused")
            expect(self.x("SELECT dlock_unlock(%s, %s)", (name, shared)) is True, "unlock of re-entry")
            count("re-entries")
        if shared:
            self.inside_shared(name)
        else:
            self.inside_exclusive(name)
        if self.x("SELECT dlock_unlock(%s, %s)", (name, shared)) is not True:
            violation("unlock of a held %s returned false" % name)

    def op_xact(self, name):
        shared = self.rnd.random() < 0.3
        with self.transaction():
            ok = self.x("SELECT dlock_lock_xact(%s, %s, %s, %s)",
                        (name, self.timeout(), shared, self.rnd.choice([None, "1 min"])))
            count("transaction %s %s" % ("shared" if shared else "exclusive", "taken" if ok else "missed"))
            if ok:
                if shared:
                    self.inside_shared(name)
                else:
                    self.inside_exclusive(name)

    def op_savepoint(self, name):
        with self.transaction():
            self.x("SAVEPOINT s")
            ok = self.x("SELECT dlock_try_xact(%s)", (name,))
            self.x("ROLLBACK TO SAVEPOINT s")
            if ok and self.x("SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") != 0:
                violation("a lock outlived its rolled-back savepoint")
            count("savepoints rolled back")

    def op_two(self, name):
        other = self.rnd.choice([n for n in NAMES if n != name])
        try:
            for nm in (name, other):
                if not self.x("SELECT dlock_lock(%s, %s)", (nm, self.rnd.choice([None, "50ms"]))):
                    count("two names: timed out")
                    return
            count("two names: both taken")
        except psycopg2.errors.DeadlockDetected:
            count("two names: deadlock detected")
        finally:
            self.x("SELECT dlock_unlock_all()")
            if self.x("SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") != 0:
                violation("dlock_unlock_all left locks behind")

    def op_overstay(self, name):
        """Hold a transaction lock past a short lease: the reaper cancels."""
        try:
            with self.transaction():
                if self.x("SELECT dlock_lock_xact(%s, '1s', lease => '200ms')", (name,)):
                    self.enter_exclusive(name)  # and stays: it is cancelled
                    self.x("SELECT pg_sleep(3)")
                    violation("overstayed a lease without being cancelled")
        except psycopg2.errors.QueryCanceled:
            count("leases enforced (cancelled)")
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            count("leases enforced (terminated)")
            self.reconnect()

    def run(self):
        try:
            self.reconnect()
            ops = [self.op_session] * 4 + [self.op_xact] * 3 + [self.op_savepoint, self.op_two]
            while time.monotonic() < self.deadline:
                name = self.rnd.choice(NAMES)
                if self.lease_abuser:
                    self.op_overstay(name)
                    time.sleep(0.05)
                else:
                    try:
                        self.rnd.choice(ops)(name)
                    except psycopg2.errors.DeadlockDetected:
                        # any waiter in a cycle may be the one told (queue
                        # order counts); it held nothing else, or its
                        # transaction is rolled back
                        count("deadlock detected (single-name waits)")
            self.conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the checks
            self.error = "%s: %s" % (type(e).__name__, e)


def setup():
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    q(c, "DROP TABLE IF EXISTS stress_inside, stress_shared, stress_log")
    q(c, "CREATE TABLE stress_inside (name text PRIMARY KEY, pid int, token bigint)")
    q(c, "CREATE TABLE stress_shared (name text, pid int)")
    q(c, "CREATE TABLE stress_log (seq bigserial PRIMARY KEY, name text, token bigint)")
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("DLOCK_STRESS_SECONDS", 10)))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DLOCK_STRESS_SEED", time.time())))
    fault.ARGS = ap.parse_args()
    args = fault.ARGS
    print("# stress: %d workers + 1 lease overstayer, %.0f s, seed %d" % (args.workers, args.seconds, args.seed),
          flush=True)
    setup()
    log_off = fault.log_size()
    reaper = fault.reaper_pid()
    workers = [Worker(i, args.seconds, args.seed) for i in range(args.workers)]
    workers.append(Worker(args.workers, args.seconds, args.seed, lease_abuser=True))
    for w in workers:
        w.start()
    for w in workers:
        w.join(args.seconds + 60)
    for k in sorted(STATS):
        print("#   %-40s %d" % (k, STATS[k]), flush=True)

    @check("stress: every worker ran to the end without an unexpected error")
    def t_workers():
        expect(all(not w.is_alive() for w in workers), "a worker is stuck")
        errors = [(w.n, w.error) for w in workers if w.error]
        expect(not errors, "errors: %r" % errors)

    @check("stress: mutual exclusion held (exclusive alone, shared never with exclusive)")
    def t_exclusion():
        expect(not VIOLATIONS, "violations: %r" % VIOLATIONS[:5])

    @check("stress: fencing tokens increase per name in hold order")
    def t_tokens():
        c = connect()
        with c.cursor() as cur:
            cur.execute("SELECT name, token FROM stress_log ORDER BY seq")
            rows = cur.fetchall()
        c.close()
        last = {}
        for name, tok in rows:
            expect(tok > last.get(name, 0), "%s: token %d after %d" % (name, tok, last.get(name, 0)))
            last[name] = tok
        expect(len(rows) > 0, "no exclusive holds recorded")

    @check("stress: every kind of operation happened, leases were enforced")
    def t_coverage():
        kinds = ["session exclusive taken", "session shared taken", "transaction exclusive taken",
                 "transaction shared taken", "savepoints rolled back", "two names: both taken",
                 "re-entries"]
        missing = [k for k in kinds if STATS.get(k, 0) == 0]
        expect(not missing, "never happened: %r" % missing)
        enforced = STATS.get("leases enforced (cancelled)", 0) + STATS.get("leases enforced (terminated)", 0)
        expect(enforced > 0, "no lease was enforced")

    @check("stress: nothing left behind once the sessions are gone; the server and the reaper never died")
    def t_clean():
        c = connect()
        pids = list(PIDS)
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_names() WHERE pid = ANY(%s)", (pids,)) == 0),
               "names left in dlock's slots")
        expect(q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = ANY(%s)", (pids,)) == 0,
               "advisory locks left")
        expect(q(c, "SELECT count(*) FROM stress_inside") == 0, "holders still inside")
        expect(q(c, "SELECT count(*) FROM stress_shared") == 0, "shared holders still inside")
        c.close()
        log = fault.log_since(log_off)
        for bad in ("terminated by signal", "PANIC", "TRAP", "server process (PID"):
            expect(bad not in log, "the log says %r" % bad)
        expect(fault.reaper_pid() == reaper, "the reaper was restarted")

    for t in (t_workers, t_exclusion, t_tokens, t_coverage, t_clean):
        t()
    print("# all stress tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
