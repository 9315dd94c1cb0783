#!/usr/bin/env python3
"""test/lines.py: many callers waiting for one detached lock (doc/detached.md).

Run by test/run (the stress suite) against its scratch cluster, which has
max_connections = 250:
    python3 test/lines.py --port 54321 [--callers 200]
Prints "ok - ..." / "not ok - ..." lines like test/fault.py, then
"# all line tests ran".  DLOCK_LINE_CALLERS sets --callers.

Callers of a waited dlock_acquire line up in their own backends, first come
first served, and only the first in line has a waiter process.  Checked,
with --callers callers (default 200) waiting for one name that a session
holds:
  - every caller is shown waiting in dlock_locks, in its own backend (the
    first in line by its waiter process), and no more than two dlock waiter
    processes run at any time of the test, sampled all along;
  - while they wait, a dlock_try of the name and a dlock_acquire that does
    not wait are refused (those in line go first);
  - a caller cancelled in line gets 57014, one whose timeout runs out in line
    gets NULL, one whose client goes away leaves the line: each is out of it
    at once, and nobody is held up by them; a timeout spent before the line
    (1 microsecond) is not a wait without limit;
  - released one by one, the others are granted in the order they came, each
    token above the one before, and nobody gets 53400;
  - shared callers behind an exclusive hold are all granted, at most two
    waiter processes meanwhile;
  - a session that holds the name shared asks for a shared detached lock of
    it while an exclusive first in line waits for that session: granted (the
    deadlock detector lets its waiter pass), not 40P01;
  - a line that moves fast (three sessions acquiring and releasing one name
    at once, 200 times each) never gets 53000; with every worker slot taken
    (waits of two roles for names of their own), the first in line of
    another name waits for a slot and gets one when a waited lock ends
    (53000 only after a second without one), and a statement_timeout in that
    wait is a cancel counted in dlock_stats;
  - a deadlock whose cycle goes through the line (a wait for the line, the
    first in line's wait for its waiter) is found: one session gets 40P01;
  - then nothing is left.
"""
import argparse
import os
import select
import sys
import threading
import time

import psycopg2
import psycopg2.extensions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402
from fault import check, expect, q, connect, RESULTS  # noqa: E402

NAME = "line-x"
CHURN = 200
MAX_WORKERS = [0]


def waiters(c):
    n = q(c, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dlock waiter'")
    MAX_WORKERS[0] = max(MAX_WORKERS[0], n)
    return n


class Caller:
    """One connection with one statement running in the background (psycopg2's asynchronous mode)."""

    def __init__(self, sql, before=()):
        self.conn = psycopg2.connect(host="/tmp/dlock-%d" % fault.ARGS.port, port=fault.ARGS.port,
                                     user="postgres", dbname="postgres", application_name="dlock-lines",
                                     async_=1)
        self.settle()
        self.pid = self.conn.get_backend_pid()
        self.cur = self.conn.cursor()
        for b in before:
            self.cur.execute(b)
            self.settle()
        self.cur.execute(sql)
        self.answer = self.error = None
        self.done = False

    def settle(self):
        while True:
            st = self.conn.poll()
            if st == psycopg2.extensions.POLL_OK:
                return
            select.select([self.conn.fileno()] if st == psycopg2.extensions.POLL_READ else [],
                          [self.conn.fileno()] if st == psycopg2.extensions.POLL_WRITE else [], [], 1)

    def finished(self):
        """Has the statement ended?  (answer or error set then.)"""
        if self.done:
            return True
        try:
            if self.conn.poll() != psycopg2.extensions.POLL_OK:
                return False
            self.answer = self.cur.fetchone()[0]
        except psycopg2.Error as e:
            self.error = e
        self.done = True
        return True

    def close(self):
        try:
            self.conn.close()
        except psycopg2.Error:
            pass


def in_line(c):
    return q(c, "SELECT count(*) FROM dlock_locks WHERE name = %s AND NOT granted", (NAME,))


def line_up(c, n, sql, shown=0):
    """n callers of sql, each one waiting (shown in dlock_locks) before the next comes."""
    callers = []
    for i in range(n):
        callers.append(Caller(sql))
        want = shown + i + 1
        fault.wait_until(lambda: in_line(c) == want, timeout=10, step=0.002)
        waiters(c)
    return callers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--callers", type=int, default=int(os.environ.get("DLOCK_LINE_CALLERS", 200)))
    fault.ARGS = ap.parse_args()
    n = fault.ARGS.callers
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    other = connect()
    q(c, "SELECT dlock_try(%s)", (NAME,))
    t0 = time.monotonic()
    sql = "SELECT dlock_acquire('%s', '1 min', timeout => '2 min')" % NAME
    callers = line_up(c, n, sql)
    print("# %d callers in line in %.1f s" % (n, time.monotonic() - t0), flush=True)

    @check("lines: %d callers of a detached lock wait in line, each shown in dlock_locks, "
           "with at most two waiter processes" % n)
    def t_shown():
        rows = q(c, "SELECT json_agg(json_build_object('pid', pid, 'scope', scope, 'mode', mode, "
                    "'state', session_state)) FROM dlock_locks WHERE name = %s AND NOT granted", (NAME,))
        expect(len(rows) == n, "dlock_locks shows %d waiting, want %d" % (len(rows), n))
        expect(all(r["scope"] == "detached" and r["mode"] == "exclusive" for r in rows), "rows: %r" % rows[:3])
        pids = {r["pid"] for r in rows}
        expect(len(pids & {k.pid for k in callers}) == n - 1, "the callers behind the first are not shown by pid")
        # the callers in line are sessions, shown with their state (1.6); the
        # first in line's row is its waiter process's, which has none
        states = sorted(set(str(r["state"]) for r in rows))
        expect(sum(1 for r in rows if r["state"] == "active") == n - 1 and states == ["None", "active"],
               "session_state of the rows in line: %r" % states)
        expect(MAX_WORKERS[0] <= 2, "%d waiter processes ran" % MAX_WORKERS[0])
        expect(waiters(c) == 1, "%d waiter processes while one name is waited for" % waiters(c))

    @check("lines: while callers wait in line, a dlock_try and a dlock_acquire that does not wait are refused")
    def t_refused():
        expect(q(other, "SELECT dlock_try(%s)", (NAME,)) is False, "dlock_try got it")
        expect(q(other, "SELECT dlock_acquire(%s, '1 min')", (NAME,)) is None, "dlock_acquire got it")

    cancelled, gone, late = callers[n // 4], callers[n // 2], None

    @check("lines: a caller cancelled in line gets 57014, one whose client goes away leaves the line, "
           "one whose timeout runs out gets NULL, each out of it at once")
    def t_leave():
        nonlocal late
        q(c, "SELECT pg_cancel_backend(%s)", (cancelled.pid,))
        expect(fault.wait_until(cancelled.finished, timeout=5, step=0.01), "the cancel did not end the wait")
        expect(cancelled.error is not None and cancelled.error.pgcode == "57014",
               "the cancelled caller got %r" % (cancelled.answer if cancelled.error is None
                                                  else cancelled.error.pgcode))
        gone.close()
        expect(fault.wait_until(lambda: in_line(c) == n - 2, timeout=5),
               "the caller whose client went away is still in line: %d" % in_line(c))
        late = Caller("SELECT dlock_acquire('%s', '1 min', timeout => '1 s')" % NAME)
        expect(fault.wait_until(late.finished, timeout=5, step=0.01), "the timeout did not end the wait")
        expect(late.error is None and late.answer is None,
               "the caller whose timeout ran out got %r" % (late.error.pgcode if late.error else late.answer))
        expect(in_line(c) == n - 2, "%d in line afterwards, want %d" % (in_line(c), n - 2))
        # a timeout spent before it is in line (here: as good as none) is not a wait without limit
        t1 = time.monotonic()
        expect(q(other, "SELECT dlock_acquire(%s, '1 min', timeout => '1 microsecond')", (NAME,)) is None,
               "a timeout of 1 microsecond got the lock")
        expect(time.monotonic() - t1 < 2, "a timeout of 1 microsecond waited %.1f s" % (time.monotonic() - t1))

    rest = [k for k in callers if k not in (cancelled, gone)]

    @check("lines: released one by one, the callers are granted in the order they came, tokens increasing, "
           "at most two waiter processes, no error")
    def t_order():
        t1 = time.monotonic()
        q(c, "SELECT dlock_unlock(%s)", (NAME,))
        tokens = []
        for i, k in enumerate(rest):
            expect(fault.wait_until(k.finished, timeout=20, step=0.001), "caller %d never answered" % i)
            waiters(c)
            early = [j for j in range(i + 1, len(rest)) if rest[j].finished()]
            expect(not early, "callers %r answered before caller %d" % (early[:5], i))
            expect(k.error is None and k.answer is not None,
                   "caller %d got %r" % (i, k.error.pgcode if k.error else k.answer))
            tokens.append(k.answer)
            expect(q(other, "SELECT dlock_release(%s, %s)", (NAME, k.answer)) is True,
                   "caller %d's token %s did not release" % (i, k.answer))
        print("# %d grants in line in %.1f s" % (len(rest), time.monotonic() - t1), flush=True)
        expect(all(b > a for a, b in zip(tokens, tokens[1:])), "tokens not increasing")
        expect(MAX_WORKERS[0] <= 2, "%d waiter processes ran" % MAX_WORKERS[0])

    @check("lines: shared callers behind an exclusive hold are all granted, at most two waiter processes")
    def t_shared():
        q(c, "SELECT dlock_try(%s)", (NAME,))
        shared = line_up(c, 20, "SELECT dlock_acquire('%s', '1 min', timeout => '2 min', shared => true)" % NAME)
        rows = q(c, "SELECT array_agg(DISTINCT mode) FROM dlock_locks WHERE name = %s AND NOT granted", (NAME,))
        expect(rows == ["shared"], "waiting modes %r" % rows)
        q(c, "SELECT dlock_unlock(%s)", (NAME,))
        for k in shared:
            expect(fault.wait_until(k.finished, timeout=20, step=0.001), "a shared caller never answered")
            waiters(c)
            expect(k.error is None and k.answer is not None, "a shared caller got %r" % (k.error or k.answer))
        expect(q(c, "SELECT count(*) FROM dlock_locks WHERE name = %s AND granted AND mode = 'shared'",
                 (NAME,)) == 20, "not all 20 shared holds are held")
        expect(MAX_WORKERS[0] <= 2, "%d waiter processes ran" % MAX_WORKERS[0])
        for k in shared:
            q(other, "SELECT dlock_release(%s, %s)", (NAME, k.answer))
            k.close()

    @check("lines: a session that holds the name shared gets a shared detached lock of it past an exclusive "
           "first in line that waits for it (no 40P01)")
    def t_reader():
        r = connect()
        q(r, "SELECT dlock_lock('line-rd', shared => true)")
        first = Caller("SELECT dlock_acquire('line-rd', '1 min', timeout => '30 s')")
        expect(fault.wait_until(lambda: waiters(c) == 1, timeout=5), "no waiter for the first in line")
        t1 = time.monotonic()
        tok = q(r, "SELECT dlock_acquire('line-rd', '1 min', shared => true, timeout => '10 s')")
        expect(tok is not None, "the reader got NULL")
        expect(time.monotonic() - t1 < 5, "the reader waited %.1f s" % (time.monotonic() - t1))
        q(r, "SELECT dlock_release('line-rd', %s)", (tok,))
        q(r, "SELECT dlock_unlock('line-rd', shared => true)")
        expect(fault.wait_until(first.finished, timeout=10), "the first in line never got it")
        expect(first.answer is not None, "the first in line got %r" % (first.error or first.answer))
        q(c, "SELECT dlock_release('line-rd', %s)", (first.answer,))
        first.close()
        r.close()

    @check("lines: a line that moves fast (3 sessions, each acquiring and releasing at once, %d times): "
           "no 53000 while the slots of ended waiters come free" % CHURN)
    def t_churn():
        errors = []

        def churn():
            k = connect()
            try:
                for _ in range(CHURN):
                    tok = q(k, "SELECT dlock_acquire('line-churn', '1 min', timeout => '10 s')")
                    if tok is None:
                        errors.append("NULL")
                    else:
                        q(k, "SELECT dlock_release('line-churn', %s)", (tok,))
            except psycopg2.Error as e:
                errors.append(e.pgcode)
            k.close()
        ts = [threading.Thread(target=churn) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        expect(not errors, "errors: %r" % errors[:5])
        expect(fault.wait_until(lambda: waiters(c) == 0, timeout=10), "waiter processes left")

    @check("lines: the first in line that finds every background worker slot taken waits for one to come free "
           "(no 53000 when one does within a second)")
    def t_no_slot():
        saved = MAX_WORKERS[0]      # (this one takes every slot on purpose)
        q(c, "DROP ROLE IF EXISTS dlock_lines_b")
        q(c, "CREATE ROLE dlock_lines_b LOGIN")
        holder = connect()
        q(holder, "SELECT count(dlock_try('slot-' || g)) FROM generate_series(0, 20) g")
        waiting = []
        full = None
        # waits of two roles (each has its share of the slots) until one finds none free
        for i in range(1, 20):
            before = waiters(c)
            k = Caller("SELECT dlock_acquire('slot-%d', '1 min', timeout => '30 s')" % i,
                       before=[] if i % 2 else ["SET SESSION AUTHORIZATION dlock_lines_b"])
            fault.wait_until(lambda: k.finished() or waiters(c) > before, timeout=5, step=0.01)
            if k.finished():
                full = k
                break
            waiting.append(k)
        expect(full is not None and full.error is not None and full.error.pgcode == "53000",
               "the slots never ran out: %r" % (full and (full.error or full.answer)))
        full.close()
        # a cancel while it waits for a slot is a cancel of the wait: counted
        k = connect()
        q(k, "SET statement_timeout = '300ms'")
        before = q(c, "SELECT coalesce(sum(cancels), 0) FROM dlock_stats WHERE name = 'slot-20'")
        try:
            q(k, "SELECT dlock_acquire('slot-20', '1 min', timeout => '30 s')")
            expect(False, "statement_timeout did not end the wait for a slot")
        except psycopg2.Error as e:
            expect(e.pgcode == "57014", "statement_timeout gave %s" % e.pgcode)
        k.close()
        expect(fault.wait_until(lambda: q(c, "SELECT coalesce(sum(cancels), 0) FROM dlock_stats "
                                             "WHERE name = 'slot-20'") == before + 1, timeout=5),
               "the cancel of a wait for a slot is not counted in dlock_stats")
        late = Caller("SELECT dlock_acquire('slot-0', '1 min', timeout => '30 s')")
        time.sleep(0.3)
        expect(not late.finished(), "the first in line was told %r at once" % (late.error or late.answer))
        # one lock is granted and released: its waiter ends, and its slot is free again
        q(holder, "SELECT dlock_unlock('slot-1')")
        expect(fault.wait_until(waiting[0].finished, timeout=5), "slot-1 was never granted")
        q(c, "SELECT dlock_release('slot-1', %s)", (waiting[0].answer,))
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE name = 'slot-0' "
                                             "AND NOT granted AND pid <> %s", (late.pid,)) == 1, timeout=5)
               or late.finished(), "the first in line never got a waiter")
        q(holder, "SELECT dlock_unlock('slot-0')")
        expect(fault.wait_until(late.finished, timeout=5), "slot-0 was never granted")
        expect(late.error is None and late.answer is not None,
               "the first in line got %r" % (late.error.pgcode if late.error else late.answer))
        # the callers leave first (a caller granted after its client went away may keep its lock)
        for k in waiting + [late]:
            k.close()
        fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE NOT granted") == 0, timeout=10)
        holder.close()
        expect(fault.wait_until(lambda: q(c, "SELECT count(dlock_release(name, token)) FROM dlock_locks "
                                             "WHERE scope = 'detached' AND granted") == 0
                                and waiters(c) == 0 and q(c, "SELECT count(*) FROM dlock_locks") == 0,
                                timeout=10), "waiters left")
        q(c, "DROP ROLE dlock_lines_b")
        MAX_WORKERS[0] = saved

    @check("lines: a deadlock through the line is found (40P01 for one of the sessions in it), "
           "the others go on")
    def t_deadlock():
        # h holds line-dl; c2, first in line, has a waiter queued behind h;
        # c3 holds line-ot and waits in line behind c2; h waits for line-ot:
        # h -> c3 -> (the line) c2 -> (its ticket) waiter -> h
        h = Caller("SELECT 1", before=["SELECT dlock_try('line-dl')"])
        fault.wait_until(h.finished, timeout=5)
        c2 = Caller("SELECT dlock_acquire('line-dl', '1 min', timeout => '30 s')")
        expect(fault.wait_until(lambda: waiters(c) == 1, timeout=5), "no waiter for the first in line")
        c3 = Caller("SELECT dlock_acquire('line-dl', '1 min', timeout => '30 s')",
                    before=["SELECT dlock_try('line-ot')"])
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE name = 'line-dl' "
                                             "AND NOT granted") == 2, timeout=5), "c3 not in line")
        h.cur.execute("SELECT dlock_lock('line-ot', timeout => '30 s')")
        h.done = False
        ended = lambda: [k for k in (h, c2, c3) if k.finished()]  # noqa: E731
        expect(fault.wait_until(lambda: ended(), timeout=10), "nobody was told of the deadlock in 10 s")
        first = ended()
        expect(len(first) == 1 and first[0].error is not None and first[0].error.pgcode == "40P01",
               "ended: %r" % [(k.answer, k.error and k.error.pgcode) for k in first])
        for k in (h, c2, c3):
            k.close()
        # the sessions are gone; a waiter granted meanwhile keeps its detached lock
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE NOT granted") == 0
                                and waiters(c) <= 1, timeout=10), "waits left")
        expect(q(c, "SELECT count(*) FROM dlock_locks WHERE name = 'line-dl' AND granted") <= 1,
               "more than one holder")
        # a waiter still running may be granted after a first release: release until none is left
        expect(fault.wait_until(lambda: q(c, "SELECT count(dlock_release(name, token)) FROM dlock_locks "
                                             "WHERE scope = 'detached' AND granted") == 0
                                and waiters(c) == 0, timeout=10), "detached locks or waiters left")

    @check("lines: nothing left (view rows, waiter processes, lines in pg_locks)")
    def t_clean():
        for k in callers + [late]:
            k.close()
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks") == 0, timeout=10),
               "dlock_locks rows left: %r" % (q(c, "SELECT string_agg(concat_ws(' ', name, scope, mode, granted, pid), "
                                                   "'; ') FROM dlock_locks"),))
        expect(fault.wait_until(lambda: waiters(c) == 0, timeout=10), "waiter processes left")
        expect(q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 6") == 0,
               "lines left in pg_locks")

    for t in (t_shown, t_refused, t_leave, t_order, t_shared, t_reader, t_churn, t_no_slot, t_deadlock, t_clean):
        t()
    print("# waiter processes at most %d at any sample" % MAX_WORKERS[0])
    print("# all line tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
