#!/usr/bin/env python3
"""test/faults.py: every fault point of dlock, driven with every action that
can land there, and the promises checked after each (DESIGN.md).

Needs a server running the fault-injection build (make DLOCK_FAULTS=1) with
dlock preloaded and dlock.token_reserve = 1 (so that every token writes the
token file); test/run starts one:
    python3 test/faults.py --port 54322 --src src

The fault points are found in the sources (DLOCK_FAULT("name")); each has a
scenario that makes a process pass it, and the actions that can happen in
that process (src/fault.c): error, fatal, cancel, terminate, kill (SIGKILL,
a crash restart), stall (the process stops taking interrupts for a while).
A point with no scenario, or a scenario that never reaches its point, is a
violation too.  After each run the invariants:
  - the caller's answer matches the lock manager: told true (or a token) it
    holds the lock and the view names it; told false, NULL or an error, it
    holds nothing of that name;
  - nothing leaks: once everything is released, no advisory lock, no view
    row, no waiter block, request, detached hold or pending undo is left;
  - no session is ended but the one whose lease expired, the bystander
    session is alive, and the server answers.
Prints "ok - point: action" or "not ok - ..." per run, then
"N fault points, M actions, K violations", then "# all fault tests ran".
"""
import argparse
import os
import re
import sys
import threading
import time

import psycopg2
import psycopg2.errors

import fault
from fault import log_since, log_size, q, wait_until

ARGS = None
VIOLATIONS = []
ACTIONS_RUN = 0

ALL = ("error", "fatal", "cancel", "terminate", "stall", "kill")
NO_CANCEL = ("error", "fatal", "terminate", "stall", "kill")   # a process that ignores SIGINT
# where dlock's own code raises nothing (a release, a transaction's end with
# interrupts held off, a statistics flush): only what comes from outside can
# land there, and a cancel or terminate is acted on at the next check
ASYNC = ("cancel", "terminate", "stall", "kill")
STALL_MS = 1500


# scenarios run "confirming" (confirming()): every session of theirs sets
# dlock.synchronous_grants, so that each grant passes grant.confirm
CONFIRMING = False


def connect(app="dlock-faults"):
    c = fault.connect(app=app)
    if CONFIRMING:
        q(c, "SET dlock.synchronous_grants = on")
    return c


def try_q(conn, sql, params=None):
    """(answer, error): the first column, or the exception."""
    try:
        return q(conn, sql, params), None
    except psycopg2.Error as e:
        return None, e


def server_conn(timeout=60):
    """A new connection, once the server answers (after a crash restart too)."""
    end = time.monotonic() + timeout
    while True:
        try:
            c = connect()
            q(c, "SELECT 1")
            return c
        except psycopg2.Error:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def pid_of(conn):
    return q(conn, "SELECT pg_backend_pid()")


def proc_pid(kind):
    server_conn().close()           # once the server answers (after a crash restart too)
    return fault.process_pid(kind) or 0


def close(*conns):
    for c in conns:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - a connection the fault ended
            pass


class Call(threading.Thread):
    """One statement on its own connection, in the background."""

    def __init__(self, conn, sql):
        super().__init__(daemon=True)
        self.conn, self.sql = conn, sql
        self.answer = self.error = None

    def run(self):
        self.answer, self.error = try_q(self.conn, self.sql)


# ---- what a run saw ----------------------------------------------------------

class Run:
    def __init__(self, point, action):
        self.point, self.action = point, action
        self.problems = []
        self.lease_victim = None      # a pid the reaper may end
        self.lease_victims = set()    # more of them

    def bad(self, what):
        self.problems.append(what)


def arm(point, action, pid=0):
    c = server_conn()
    if point == "token.file":
        # the first token after a start (also a crash restart) is below the
        # ceiling the start reserved: drawn here, so that the scenario's own
        # draw is past it and writes the file (else the point is reached only
        # when the scenario's call starts the tokens before the reaper does)
        q(c, "SELECT dlock_try('token-pre') AND dlock_unlock('token-pre')")
    q(c, "SELECT dlock_fault_set(%s, %s, %s, %s, 0)", (point, action, STALL_MS, pid))
    c.close()


def fired():
    c = server_conn()
    try:
        return q(c, "SELECT dlock_fault_hits()")
    finally:
        q(c, "SELECT dlock_fault_clear()")
        c.close()


def holds_session(obs, pid, name):
    """Does process pid hold the advisory lock of name (objsubid 1)?"""
    return q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
                  "AND pid = %s AND (classid::bigint << 32 | objid::bigint) = dlock_key(%s) & x'ffffffffffffffff'::bigint",
             (pid, name)) > 0


def named(obs, name, scope=None):
    sql = "SELECT count(*) FROM dlock_locks WHERE name = %s AND granted"
    if scope:
        sql += " AND scope = '%s'" % scope
    return q(obs, sql, (name,))


def check_answer_session(run, obs, pid, name, answer, error, died):
    """Told true: held and named.  Told false or an error: not held, nor an
    update gate of the name (objsubid 7) kept."""
    if died or run.action == "kill":
        return                  # its locks went with it (a crash: everyone's)
    held = holds_session(obs, pid, name)
    if answer is not True and q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                     "AND objsubid = 7 AND pid = %s AND (classid::bigint << 32 | objid::bigint) "
                                     "= dlock_key(%s) & x'ffffffffffffffff'::bigint", (pid, name)):
        run.bad("told %s, yet keeps the update gate" % (error.pgcode if error else answer))
    if answer is True:
        if not held:
            run.bad("told true, the lock manager does not have it")
        elif q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND pid = %s AND granted", (name, pid)) == 0:
            run.bad("told true, the view does not name it")
    elif held:
        run.bad("told %s, yet holds the lock" % (error.pgcode if error else answer))


def check_answer_detached(run, obs, name, token, error, holder_gone):
    """Told a token: held, with it, once things settle.  Told NULL or an error: not held."""
    def settled():
        rows = q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND scope = 'detached' AND granted", (name,))
        return rows == (1 if token is not None else 0)
    if (token is not None and holder_gone) or run.action == "kill":
        return          # its process died with it: released (doc/detached.md)
    if not wait_until(settled, 5):
        if token is not None:
            run.bad("told token %s, no such detached hold" % token)
        else:
            run.bad("told %s, yet a detached hold of the name is left"
                    % (error.pgcode if error else "NULL"))
    elif token is not None and q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND token = %s",
                                 (name, token)) != 1:
        run.bad("told token %s, the view shows another" % token)


def died(conn):
    try:
        q(conn, "SELECT 1")
        return False
    except psycopg2.Error:
        return True


# ---- scenarios: make a process pass a point ---------------------------------

def sc_session(run, point, pid_filter, xact=False, mode=None):
    """mode: 'update' takes the name in update mode (1.7)."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    m = ", mode => '%s'" % mode if mode else ""
    arm(point, run.action, apid if pid_filter == "caller" else 0)
    if xact:
        q(a, "BEGIN")
        answer, error = try_q(a, "SELECT dlock_try_xact('f', lease => '30s'%s)" % m)
        check_answer_session(run, obs, apid, "f", answer, error, died(a))
        try_q(a, "ROLLBACK")
    else:
        answer, error = try_q(a, "SELECT dlock_try('f', lease => '30s'%s)" % m)
        check_answer_session(run, obs, apid, "f", answer, error, died(a))
        try_q(a, "SELECT dlock_unlock_all()")
    close(a, obs)


def sc_update(run, point, pid_filter):
    sc_session(run, point, pid_filter, mode="update")


def sc_update_xact(run, point, pid_filter):
    sc_session(run, point, pid_filter, xact=True, mode="update")


def sc_update_wait(run, point, pid_filter):
    sc_session_wait(run, point, pid_filter, mode="update")


def sc_update_lower(run, point, pid):
    """dlock_lower of a transaction-scope raise: whatever lands between the
    lock manager's release and the record, the exclusive hold is gone (from
    pg_locks and the view) and the update hold goes on, until the end of
    the transaction, which leaves nothing."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    q(a, "BEGIN")
    q(a, "SELECT dlock_try_xact('f', mode => 'update'), dlock_raise('f')")
    arm(point, run.action, apid)
    answer, error = try_q(a, "SELECT dlock_lower('f')")
    if not died(a) and run.action != "kill":
        if answer is False:
            run.bad("dlock_lower said false for a raised hold")
        if q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s "
                  "AND mode = 'ExclusiveLock' AND objsubid = 1", (apid,)):
            run.bad("after dlock_lower (%r / %r) the exclusive lock is still held"
                    % (answer, error and error.pgcode))
        if q(obs, "SELECT count(*) FROM dlock_locks WHERE pid = %s AND mode = 'exclusive'", (apid,)):
            run.bad("after dlock_lower the view still shows the exclusive hold")
    try_q(a, "ROLLBACK")
    if not died(a) and q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (apid,)):
        run.bad("after the transaction the session still has advisory locks")
    close(a, obs)


def sc_several(run, point, pid_filter, xact=False, skip=1):
    """Several names at once, the fault landing after the first is taken
    (skip 1; a point passed once a call: skip 0): told true, every name is
    held; told false or an error, none."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    c = server_conn()
    q(c, "SELECT dlock_fault_set(%s, %s, %s, %s, %s)", (point, run.action, STALL_MS, apid, skip))
    c.close()
    names = ("m1", "m2", "m3")
    if xact:
        q(a, "BEGIN")
    answer, error = try_q(a, "SELECT dlock_%s(ARRAY['m1', 'm2', 'm3'], timeout => '5s', lease => '30s')"
                          % ("lock_xact" if xact else "lock"))
    if not died(a) and run.action != "kill":
        held = [n for n in names if holds_session(obs, apid, n)]
        if answer is True and len(held) != 3:
            run.bad("told true, holds only %s" % held)
        elif answer is not True and held:
            run.bad("told %s, yet holds %s" % (error.pgcode if error else answer, held))
    if xact:
        try_q(a, "ROLLBACK")
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, obs)


def sc_several_xact(run, point, pid_filter):
    sc_several(run, point, pid_filter, xact=True)


def sc_session_wait(run, point, pid_filter, mode=None):
    """mode 'update': the caller waits for another updater's gate (1.7)."""
    obs, a, b = server_conn(), connect(), connect()
    apid = pid_of(a)
    m = ", mode => '%s'" % mode if mode else ""
    q(b, "SELECT dlock_try('f'%s)" % m)
    arm(point, run.action, apid if pid_filter == "caller" else 0)
    call = Call(a, "SELECT dlock_lock('f', '10s', lease => '30s'%s)" % m)
    call.start()
    wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", (apid,)) > 0, 3)
    try_q(b, "SELECT dlock_unlock('f'%s)" % m)
    call.join(20)
    check_answer_session(run, obs, apid, "f", call.answer, call.error, died(a))
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, b, obs)


def sc_renew(run, point, pid_filter):
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    q(a, "SELECT dlock_try('f', lease => '30s')")
    arm(point, run.action, apid)
    answer, error = try_q(a, "SELECT dlock_renew('f', '40s')")
    # the hold is the caller's either way (renewing failed or not)
    check_answer_session(run, obs, apid, "f", True, None, died(a))
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, obs)


def detached_run(run, point, pid, sql, before=None, obs=None):
    obs = obs or server_conn()
    a = connect()
    hpid = proc_pid("dlock lock holder")
    target = {"caller": pid_of(a), "holder": hpid, "any": 0}[pid]
    if before:
        before(a)
    arm(point, run.action, target)
    answer, error = try_q(a, sql)
    holder_gone = pid == "holder" and run.action in ("fatal", "terminate", "kill")
    return obs, a, answer, error, holder_gone


def sc_detached(run, point, pid, sql="SELECT dlock_acquire('f', '30s')"):
    """Another client's detached lock ('bystander') must outlive whatever
    lands in the lock holder short of its death (1.4: an error in the lock
    holder ended it, and every client's detached lock with it)."""
    obs = server_conn()
    bystander = q(obs, "SELECT dlock_acquire('bystander', '60s')")
    obs, a, token, error, gone = detached_run(run, point, pid, sql, obs=obs)
    check_answer_detached(run, obs, "f", token, error, gone or died(obs))
    if not gone and run.action != "kill" and not died(obs) and \
            q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'bystander' AND token = %s", (bystander,)) != 1:
        run.bad("another client's detached lock was lost")
    release_all_detached()
    close(a, obs)


def sc_detached_undo(run, point, pid):
    obs, a = server_conn(), connect()
    q(a, "BEGIN")
    q(a, "SELECT dlock_acquire('f', '30s')")
    arm(point, run.action, pid_of(a))
    try_q(a, "ROLLBACK")
    check_answer_detached(run, obs, "f", None, None, False)
    release_all_detached()
    close(a, obs)


def sc_detached_extend(run, point, pid):
    obs, a = server_conn(), connect()
    token = q(a, "SELECT dlock_acquire('f', '30s')")
    arm(point, run.action, proc_pid("dlock lock holder"))
    try_q(a, "SELECT dlock_extend('f', %s, '40s')" % token)
    try_q(a, "SELECT dlock_release('f', %s)" % token)
    release_all_detached()
    close(a, obs)


def sc_detached_min_hold(run, point, pid):
    """A release before the minimum hold ends: answered true, the lock stays
    until the minimum hold ends and then goes; answered with an error, it
    stays the caller's (extend and release still work); the lock holder's
    other locks are untouched unless it died."""
    obs, a = server_conn(), connect()
    bystander = q(obs, "SELECT dlock_acquire('bystander', '60s')")
    token = q(a, "SELECT dlock_acquire('f', '30s', min_hold => '1 s')")
    arm(point, run.action, proc_pid("dlock lock holder"))
    answer, error = try_q(a, "SELECT dlock_release('f', %s)" % token)
    gone = died(obs) or run.action in ("fatal", "terminate", "kill")
    if answer is True:
        if not wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f'") == 0, 5):
            run.bad("released before its minimum hold, still held 5 s later")
    elif error is not None and not gone:
        ext, _ = try_q(a, "SELECT dlock_extend('f', %s, '30s') IS NOT NULL" % token)
        if ext is not True:
            run.bad("release failed (%s), yet the lock is no longer the caller's" % error.pgcode)
    if not gone and not died(obs) and \
            q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'bystander' AND token = %s", (bystander,)) != 1:
        run.bad("another client's detached lock was lost")
    release_all_detached()
    close(a, obs)


def sc_detached_released_twice(run, point, pid):
    """A second release of a lock released early, kept for its minimum hold,
    while the lock holder is at the point: told false with "released
    already" while the holder lives; if it died before answering (the lock
    with it), false without that (nothing is kept any more); an error in it
    reaches the caller."""
    obs, a = server_conn(), connect()
    token = q(a, "SELECT dlock_acquire('f', '30s', min_hold => '3 s')")
    q(a, "SELECT dlock_release('f', %s)" % token)
    del a.notices[:]
    arm(point, run.action, proc_pid("dlock lock holder"))
    answer, error = try_q(a, "SELECT dlock_release('f', %s)" % token)
    said = " ".join(a.notices) if not died(a) else ""
    # a FATAL ends the holder at the point, before it answers; a terminate
    # is acted on at its next check, after it answered (either is true then)
    gone = run.action == "fatal"
    if error is None and answer is not False:
        run.bad("a second release answered %r" % answer)
    elif error is None and gone and "released already" in said:
        run.bad("the lock holder died, yet the caller was told the lock is kept: %s" % said.strip())
    elif error is None and run.action in ("error", "stall") and "released already" not in said:
        run.bad("a second release did not say the lock was released already: %r" % said.strip())
    release_all_detached()
    wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f'") == 0, 8)
    close(a, obs)


def sc_detached_min_hold_cancel(run, point, pid):
    """The caller gives up (statement_timeout) while the lock holder is
    stalled at the release before the minimum hold: told an error, the
    lock stays the caller's, to extend and release again."""
    obs, a = server_conn(), connect()
    token = q(a, "SELECT dlock_acquire('f', '30s', min_hold => '5 s')")
    arm(point, run.action, proc_pid("dlock lock holder"))
    q(a, "SET statement_timeout = '300ms'")
    answer, error = try_q(a, "SELECT dlock_release('f', %s)" % token)
    q(a, "RESET statement_timeout")
    time.sleep(STALL_MS / 1000.0 + 0.5)
    if error is not None:
        ext, e2 = try_q(a, "SELECT dlock_extend('f', %s, '30s') IS NOT NULL" % token)
        if ext is not True:
            run.bad("release cancelled (%s), yet the lock is no longer the caller's: %s"
                    % (error.pgcode, e2.pgcode if e2 else ext))
    elif answer is not True:
        run.bad("release answered %r" % answer)
    release_all_detached()
    wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f'") == 0, 8)
    close(a, obs)


def sc_detached_force(run, point, pid, wait=False):
    """An operator's override (dlock_force_release) of a lock in its minimum
    hold, held by the lock holder, or (wait) by the waiter process of an
    acquisition that waited.  Told true: the lock is gone, and another
    caller gets it.  Told an error: it stays its owner's (extend works),
    unless the process that held it died (its locks go with it); told false
    only then (not held: true).  Another
    client's lock is untouched unless the lock holder died."""
    obs, a, b = server_conn(), connect(), connect()
    bystander = q(obs, "SELECT dlock_acquire('bystander', '60s')")
    if wait:
        tb = q(b, "SELECT dlock_acquire('f', '30s')")
        call = Call(a, "SELECT dlock_acquire('f', '30s', timeout => '10s', min_hold => '3 s')")
        call.start()
        wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f' AND NOT granted") > 0, 5)
        q(b, "SELECT dlock_release('f', %s)" % tb)
        call.join(20)
        token = call.answer
        holder = q(obs, "SELECT pid FROM dlock_locks WHERE name = 'f' AND granted AND token = %s", (token,))
    else:
        token = q(a, "SELECT dlock_acquire('f', '30s', min_hold => '3 s')")
        holder = proc_pid("dlock lock holder")
    if token is None or holder is None:
        run.bad("the lock to override was never held (%r)" % (call.error if wait else None))
        release_all_detached()
        close(a, b, obs)
        return
    arm(point, run.action, holder)
    answer, error = try_q(obs, "SELECT dlock_force_release('f', %s)" % token)
    gone = died(obs) or run.action == "kill" or \
        (run.action in ("error", "fatal", "terminate") and (wait or run.action != "error"))
    obs = server_conn() if died(obs) else obs
    if answer is True:
        if q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f'") != 0:
            run.bad("told true, the lock is still held")
        elif q(obs, "SELECT dlock_acquire('f', '30s')") is None:
            run.bad("told true, another caller does not get the lock")
    elif answer is False and not gone:
        run.bad("the override of a held lock answered false")
    elif answer is False:
        # its process died serving it, and the lock with it: "not held" is true
        if q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f' AND token = %s", (token,)) != 0:
            run.bad("told false (its process died), yet the lock is still held")
    elif not gone:
        ext, e2 = try_q(a, "SELECT dlock_extend('f', %s, '30s') IS NOT NULL" % token)
        if ext is not True:
            run.bad("the override failed (%s), yet the lock is no longer its owner's: %s"
                    % (error.pgcode if error else None, e2.pgcode if e2 else ext))
    if not died(obs) and not (run.action in ("fatal", "terminate", "kill") and not wait) and \
            q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'bystander' AND token = %s", (bystander,)) != 1:
        run.bad("another client's detached lock was lost")
    release_all_detached()
    close(a, b, obs)


def sc_detached_force_waiter(run, point, pid):
    sc_detached_force(run, point, pid, wait=True)


def sc_detached_several(run, point, pid, skip=1):
    """Detached locks of several names, the fault landing after the first is
    acquired (skip 1; a point passed once a call: skip 0): told tokens, each
    name is held; told NULL or an error, none is, once the lock holder has
    undone them."""
    obs, a = server_conn(), connect()
    c = server_conn()
    q(c, "SELECT dlock_fault_set(%s, %s, %s, %s, %s)", (point, run.action, STALL_MS, pid_of(a), skip))
    c.close()
    answer, error = try_q(a, "SELECT dlock_acquire(ARRAY['m1', 'm2', 'm3'], '30s')")
    held = "SELECT count(*) FROM dlock_locks WHERE name IN ('m1', 'm2', 'm3') AND scope = 'detached' AND granted"
    if run.action != "kill" and not died(obs):
        if answer is not None and not wait_until(lambda: q(obs, held) == 3, 5):
            run.bad("told tokens %s, holds %s of 3" % (answer, q(obs, held)))
        elif answer is None and not wait_until(lambda: q(obs, held) == 0, 5):
            run.bad("told %s, yet %s of the names are held"
                    % (error.pgcode if error else "NULL", q(obs, held)))
    release_all_detached()
    close(a, obs)


def sc_detached_wait(run, point, pid, cancel=False):
    obs, a, b = server_conn(), connect(), connect()
    apid = pid_of(a)
    tb = q(b, "SELECT dlock_acquire('f', '30s')")
    arm(point, run.action, apid if pid == "caller" else 0)
    call = Call(a, "SELECT dlock_acquire('f', '30s', timeout => '10s')")
    call.start()
    time.sleep(0.5)
    if cancel:
        try_q(obs, "SELECT pg_cancel_backend(%s)", (apid,))
        time.sleep(0.2)
    try_q(b, "SELECT dlock_release('f', %s)" % tb)
    call.join(20)
    # a waiter that ends after its grant (an error, a FATAL, a terminate)
    # takes the lock with it, as a terminated holding process does
    waiter_gone = point == "waiter.holding" and run.action in ("error", "fatal", "terminate")
    check_answer_detached(run, obs, "f", call.answer, call.error, waiter_gone)
    # an error in a waiter reaches its caller as it was (1.4: as 57P01)
    if pid == "any" and run.action == "error" and point != "waiter.holding" and call.answer is None:
        if call.error is None or "dlock fault injected" not in str(call.error):
            run.bad("the waiter's error reached the caller as %r" % (call.error and call.error.pgcode))
    release_all_detached()
    close(a, b, obs)


def sc_detached_wait_cancel(run, point, pid):
    sc_detached_wait(run, point, pid, cancel=True)


def sc_detached_line(run, point, pid, cancel=False):
    """A waited detached acquisition in line behind another: a fault while
    it waits for the line (detached.line) or once it is first in line
    (detached.first).  Its answer must be the truth, the one before it and
    the one behind it get theirs in turn, and nothing is left in line."""
    obs, a, b, c, d = server_conn(), connect("dlock-faults-a"), connect(), connect(), connect()
    apid = pid_of(a)
    tb = q(b, "SELECT dlock_acquire('f', '30s')")
    first = Call(c, "SELECT dlock_acquire('f', '30s', timeout => '10s')")
    first.start()
    wait_until(lambda: q(obs, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dlock waiter'") > 0, 5)
    arm(point, run.action, apid if pid == "caller" else 0)
    call = Call(a, "SELECT dlock_acquire('f', '30s', timeout => '10s')")
    call.start()
    wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks WHERE objsubid = 6 AND NOT granted") > 0, 3)
    behind = Call(d, "SELECT dlock_acquire('f', '30s', timeout => '10s')")
    behind.start()
    time.sleep(0.3)
    if cancel:
        try_q(obs, "SELECT pg_cancel_backend(%s)", (apid,))
        time.sleep(0.2)
    try_q(b, "SELECT dlock_release('f', %s)" % tb)
    first.join(20)
    if first.answer is None and run.action != "kill":
        run.bad("the first in line was told %s" % (first.error.pgcode if first.error else "NULL"))
    time.sleep(0.3)
    try_q(obs, "SELECT dlock_release('f', %s)" % first.answer)
    # the lock may be free now, but the line is not empty: no jumping it
    # (a stall at detached.first is that moment, drawn out)
    probe, _ = try_q(obs, "SELECT dlock_acquire('f', '30s')")
    if probe is not None:
        run.bad("an acquisition without a wait jumped the line")
        try_q(obs, "SELECT dlock_release('f', %s)" % probe)
    # nor one of a session that reads the name already (only its waits skip the line)
    r = connect()
    if try_q(r, "SELECT dlock_try('f', shared => true)")[0]:
        probe, _ = try_q(r, "SELECT dlock_acquire('f', '30s', shared => true)")
        if probe is not None:
            run.bad("a reader's acquisition without a wait jumped the line")
            try_q(r, "SELECT dlock_release('f', %s)" % probe)
        try_q(r, "SELECT dlock_unlock('f', shared => true)")
    close(r)
    call.join(20)
    # what a holds is told by its application_name: d may hold the name
    held = q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f' AND scope = 'detached' AND granted "
                  "AND application_name = 'dlock-faults-a'")
    if run.action != "kill" and held != (1 if call.answer is not None else 0):
        run.bad("told %s, and %s detached holds of a" % (call.answer if call.error is None else call.error.pgcode,
                                                        held))
    if call.answer is not None:
        try_q(obs, "SELECT dlock_release('f', %s)" % call.answer)
    behind.join(20)
    if behind.answer is None and run.action != "kill":
        run.bad("the one behind was told %s" % (behind.error.pgcode if behind.error else "NULL"))
    release_all_detached()
    close(a, b, c, d, obs)


def sc_detached_line_cancel(run, point, pid):
    sc_detached_line(run, point, pid, cancel=True)


def sc_cancel_then_next(run, point, pid):
    """The holder stalls on an acquisition whose caller is cancelled; the
    caller's next call (a release of another lock) must not be mixed into
    the request the holder is still working on."""
    obs, a, b = server_conn(), connect(), connect()
    apid = pid_of(a)
    tb = q(b, "SELECT dlock_acquire('g', '30s', shared => true)")
    arm(point, run.action, proc_pid("dlock lock holder"))
    call = Call(a, "SELECT dlock_acquire('f', '30s', shared => true)")
    call.start()
    time.sleep(0.3)
    try_q(obs, "SELECT pg_cancel_backend(%s)", (apid,))
    call.join(10)
    released, error = try_q(a, "SELECT dlock_release('g', %s)" % tb)
    if released is not True:
        run.bad("the next call was mixed up: dlock_release gave %r / %r" % (released, error))
    check_answer_detached(run, obs, "f", call.answer, call.error, False)
    release_all_detached()
    close(a, b, obs)


def sc_token_wait(run, point, pid):
    """One backend stalls writing the token file (holding its lock); another
    that needs a token meanwhile must still be cancellable, and not keep
    the lock it was granted."""
    obs, a, b = server_conn(), connect(), connect()
    bpid = pid_of(b)
    arm(point, run.action, pid_of(a))
    first = Call(a, "SELECT dlock_try('f')")
    first.start()
    time.sleep(0.3)
    second = Call(b, "SELECT dlock_try('f2')")
    second.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    try_q(obs, "SELECT pg_cancel_backend(%s)", (bpid,))
    second.join(STALL_MS / 1000.0)
    if second.is_alive() or time.monotonic() - t0 > 1.0:
        run.bad("a call waiting for the token file's lock was not cancelled at once")
    second.join(10)
    first.join(10)
    check_answer_session(run, obs, bpid, "f2", second.answer, second.error, died(b))
    try_q(a, "SELECT dlock_unlock_all()")
    try_q(b, "SELECT dlock_unlock_all()")
    close(a, b, obs)


def sc_release_in_window(run, point, pid):
    """A waiter stalls between showing its hold (with its token, in the
    view) and handing it over: a dlock_release with that token then must
    reach it (1.4 answered "not held")."""
    obs, a, b = server_conn(), connect(), connect()
    tb = q(b, "SELECT dlock_acquire('f', '30s')")
    arm(point, run.action, 0)
    call = Call(a, "SELECT dlock_acquire('f', '30s', timeout => '10s')")
    call.start()
    time.sleep(0.5)
    try_q(b, "SELECT dlock_release('f', %s)" % tb)
    seen = []
    wait_until(lambda: seen.append(q(obs, "SELECT token FROM dlock_locks WHERE name = 'f' AND scope = 'detached' "
                                          "AND granted AND token <> %s", (tb,))) or seen[-1] is not None, 3)
    token = seen[-1] if seen else None
    if token is None:
        run.bad("the waiter's hold never showed in the view")
    else:
        released, error = try_q(obs, "SELECT dlock_release('f', %s)" % token)
        if released is not True:
            run.bad("dlock_release with the token the view shows: %r / %r" % (released, error))
    call.join(20)
    check_answer_detached(run, obs, "f", None, None, False)
    release_all_detached()
    close(a, b, obs)


def sc_reaper(run, point, pid, xact=False):
    """A lease expires; the reaper passes its point just before it signals.
    With a stall, the holder lets go and takes the name afresh without a
    lease meanwhile: it must not be ended, nor its next statement cancelled."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    arm(point, run.action, proc_pid("dlock lease reaper"))
    if xact:
        q(a, "BEGIN")
        q(a, "SELECT dlock_try_xact('f', lease => '300ms')")
    else:
        q(a, "SELECT dlock_try('f', lease => '300ms')")
    if run.action == "stall":
        if not wait_until(lambda: fired_peek() > 0, 5):
            run.bad("the reaper never came to its point")
        if xact:
            try_q(a, "ROLLBACK")
        else:
            try_q(a, "SELECT dlock_unlock('f'), dlock_try('f')")
        time.sleep(STALL_MS / 1000.0 + 1.0)
        answer, error = try_q(a, "SELECT pg_sleep(0.5), 1")
        if error is not None:
            run.bad("a session that let go of its expired hold was %s" % error.pgcode)
    else:
        # the reaper fails or dies at its point: the lease is still enforced
        run.lease_victim = apid
        if not wait_until(lambda: died(a) or not holds_session(obs, apid, "f"), 20):
            run.bad("the expired lease was never enforced")
        run.lease_victim = apid
    try_q(a, "ROLLBACK")
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, obs)


def sc_unlock(run, point, pid, mode=None):
    """A release: whatever lands between the lock manager's release and the
    record, the session holds nothing of the name afterwards (neither the
    lock nor its lease marker, nor an update hold's gate), and the view
    shows nothing of it."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    m = ", mode => '%s'" % mode if mode else ""
    q(a, "SELECT dlock_try('f', lease => '30s'%s)" % m)
    arm(point, run.action, apid)
    answer, error = try_q(a, "SELECT dlock_unlock('f'%s)" % m)
    if not died(a):
        if answer is False:
            run.bad("dlock_unlock said false for a lock it held")
        left = q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (apid,))
        if left:
            run.bad("after dlock_unlock (%r / %r) the session still has %s advisory locks"
                    % (answer, error and error.pgcode, left))
        if q(obs, "SELECT count(*) FROM dlock_locks WHERE pid = %s", (apid,)):
            run.bad("after dlock_unlock the view still shows the hold")
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, obs)


def xact_end_run(run, point, end, savepoint=False):
    """A transaction with a transaction-scope lock and a detached
    acquisition ends (or rolls back to a savepoint) while the point fires:
    the transaction-scope lock is gone, and the detached lock is kept if and
    only if the transaction committed (a row it wrote says whether it did:
    a terminate right after COMMIT loses the client's answer, not the
    commit)."""
    obs, a = server_conn(), connect()
    apid = pid_of(a)
    q(obs, "DELETE FROM fault_commit")
    q(a, "BEGIN")
    if savepoint:
        q(a, "SAVEPOINT s")
    q(a, "INSERT INTO fault_commit VALUES (1)")
    q(a, "SELECT dlock_try_xact('f', lease => '30s')")
    token = q(a, "SELECT dlock_acquire('g', '30s')")
    arm(point, run.action, apid)
    try_q(a, end)
    if savepoint:
        if not died(a) and holds_session(obs, apid, "f"):
            run.bad("the lock of a rolled-back savepoint is still held")
        try_q(a, "COMMIT")
    if not died(a) and holds_session(obs, apid, "f"):
        run.bad("the transaction ended, its transaction-scope lock is still held")
    committed = q(obs, "SELECT count(*) FROM fault_commit") > 0
    check_answer_detached(run, obs, "g", token if committed else None, None, run.action == "kill")
    release_all_detached()
    try_q(a, "ROLLBACK")
    close(a, obs)


def sc_commit(run, point, pid):
    xact_end_run(run, point, "COMMIT")


def sc_rollback(run, point, pid):
    xact_end_run(run, point, "ROLLBACK")


def sc_rollback_to(run, point, pid):
    xact_end_run(run, point, "ROLLBACK TO SAVEPOINT s", savepoint=True)


def sc_slot_change(run, point, pid):
    """A process stopped inside its slot's change window: the reaper, which
    reads every slot under its change counter, still ends another session
    whose lease ran out, in time, whichever of the two slots it reads first
    (1.4 and the first hardening waited for the stopped process)."""
    if run.action != "stall":
        sc_session(run, point, "caller")
        return
    for order in (0, 1):
        obs, s1, s2 = server_conn(), connect(), connect()
        a, b = (s1, s2) if order == 0 else (s2, s1)
        apid, bpid = pid_of(a), pid_of(b)
        q(a, "SELECT dlock_try('warm'), dlock_unlock('warm')")   # its slot in use
        q(b, "SELECT dlock_try('g', lease => '300ms')")
        run.lease_victims.add(bpid)
        arm(point, run.action, apid)
        call = Call(a, "SELECT dlock_try('f')")
        call.start()
        if not wait_until(lambda: not fault.alive(obs, bpid), 1.0):
            run.bad("an expired lease waited for a process stopped in its change window (order %d)" % order)
        call.join(10)
        check_answer_session(run, obs, apid, "f", call.answer, call.error, died(a))
        try_q(a, "SELECT dlock_unlock_all()")
        close(a, b, obs)


def sc_xact(run, point, pid_filter):
    sc_session(run, point, pid_filter, xact=True)


def sc_reaper_xact(run, point, pid):
    sc_reaper(run, point, pid, xact=True)


def confirming(scenario, **kw):
    """scenario with dlock.synchronous_grants on in its sessions (no
    synchronous standby here: the fault lands where the wait begins)."""
    def run_confirming(run, point, proc):
        global CONFIRMING
        CONFIRMING = True
        try:
            scenario(run, point, proc, **kw)
        finally:
            CONFIRMING = False
    run_confirming.__name__ = scenario.__name__ + "_confirming"
    return run_confirming


def fired_peek():
    c = server_conn()
    try:
        return q(c, "SELECT dlock_fault_hits()")
    finally:
        c.close()


def holds_permit(obs, pid, name):
    """Does process pid hold a permit of name (objsubid 1, or 1000 + p)?"""
    return q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                  "AND (objsubid = 1 OR objsubid > 1000) AND pid = %s "
                  "AND (classid::bigint << 32 | objid::bigint) = dlock_key(%s) & x'ffffffffffffffff'::bigint",
             (pid, name)) > 0


def check_answer_permit(run, obs, pid, name, answer, error, gone):
    """A semaphore's permit: told true, held and named with its permit; told
    false or an error, no permit of the name and no place in its line."""
    if gone or run.action == "kill":
        return
    held = holds_permit(obs, pid, name)
    if answer is True:
        if not held:
            run.bad("told true, no permit in the lock manager")
        elif q(obs, "SELECT count(*) FROM dlock_locks WHERE name = %s AND pid = %s AND granted "
                    "AND permit IS NOT NULL", (name, pid)) == 0:
            run.bad("told true, the view does not show its permit")
    elif held:
        run.bad("told %s, yet holds a permit" % (error.pgcode if error else answer))
    if q(obs, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1000 AND pid = %s",
         (pid,)) > 0:
        run.bad("left in the line (the turnstile) after its call ended")


def sc_permit(run, point, pid_filter):
    """A permit taken without waiting (permits 1 of 2 held by another)."""
    obs, a, b = server_conn(), connect(), connect()
    apid = pid_of(a)
    q(b, "SELECT dlock_try('f', permits => 2)")
    arm(point, run.action, apid)
    answer, error = try_q(a, "SELECT dlock_try('f', lease => '30s', permits => 2)")
    check_answer_permit(run, obs, apid, "f", answer, error, died(a))
    try_q(a, "SELECT dlock_unlock_all()")
    try_q(b, "SELECT dlock_unlock_all()")
    close(a, b, obs)


def sc_permit_wait(run, point, pid_filter, xact=False):
    """First in line for a permit; one is released while it waits."""
    obs, a, b, c = server_conn(), connect(), connect(), connect()
    apid = pid_of(a)
    q(b, "SELECT dlock_try('f', permits => 2)")
    q(c, "SELECT dlock_try('f', permits => 2)")
    arm(point, run.action, apid)
    if xact:
        q(a, "BEGIN")
    call = Call(a, "SELECT dlock_lock%s('f', '10s', lease => '30s', permits => 2)" % ("_xact" if xact else ""))
    call.start()
    wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks WHERE pid = %s AND objsubid = 1000", (apid,)) > 0, 3)
    time.sleep(0.1)
    try_q(b, "SELECT dlock_unlock('f')")
    call.join(20)
    check_answer_permit(run, obs, apid, "f", call.answer, call.error, died(a))
    if xact:
        try_q(a, "ROLLBACK")
    try_q(a, "SELECT dlock_unlock_all()")
    try_q(c, "SELECT dlock_unlock_all()")
    close(a, b, c, obs)


def sc_permit_wait_xact(run, point, pid_filter):
    sc_permit_wait(run, point, pid_filter, xact=True)


def sc_permit_detached(run, point, pid):
    """A detached permit taken by the lock holder (another's held already)."""
    obs, b = server_conn(), connect()
    tb = q(b, "SELECT dlock_acquire('f', '30s', permits => 2)")
    obs, a, token, error, gone = detached_run(run, point, pid, "SELECT dlock_acquire('f', '30s', permits => 2)",
                                              obs=obs)
    if not gone and run.action != "kill" and not died(obs):
        want = 2 if token is not None else 1
        if not wait_until(lambda: q(obs, "SELECT count(*) FROM dlock_locks WHERE name = 'f' AND granted "
                                         "AND scope = 'detached'") == want, 5):
            run.bad("told %s, the lock holder holds another number of permits"
                    % (token if token is not None else (error.pgcode if error else "NULL")))
    try_q(b, "SELECT dlock_release('f', %s)" % tb)
    release_all_detached()
    close(a, b, obs)


def sc_permit_detached_wait(run, point, pid):
    """A waited detached permit: its waiter process is first in line."""
    obs, a, b, c = server_conn(), connect(), connect(), connect()
    q(b, "SELECT dlock_try('f', permits => 2)")
    q(c, "SELECT dlock_try('f', permits => 2)")
    arm(point, run.action, 0)
    call = Call(a, "SELECT dlock_acquire('f', '30s', timeout => '10s', permits => 2)")
    call.start()
    wait_until(lambda: q(obs, "SELECT count(*) FROM pg_locks WHERE objsubid = 1000") > 0, 3)
    time.sleep(0.1)
    try_q(b, "SELECT dlock_unlock('f')")
    call.join(20)
    check_answer_detached(run, obs, "f", call.answer, call.error, False)
    try_q(c, "SELECT dlock_unlock_all()")
    release_all_detached()
    close(a, b, c, obs)


def release_all_detached():
    c = server_conn()
    wait_until(lambda: q(c, "SELECT count(dlock_release(name, token)) FROM dlock_locks "
                            "WHERE scope = 'detached' AND granted") == 0 or True, 1)
    wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE scope = 'detached'") == 0, 5)
    c.close()


# point -> (scenario, process, actions)
def sc_notify(run, point, pid):
    """An event of a hold taken with notify (1.7): whatever happens to the
    notifier as it sends it, the caller's answer is the lock manager's, the
    event is sent all the same (by a notifier started anew: at least once),
    and so is the next one, after it."""
    import json
    import select
    obs, a, lis = server_conn(), connect(), connect()
    q(lis, "LISTEN dlock")
    apid = pid_of(a)
    arm(point, run.action, 0)
    answer, error = try_q(a, "SELECT dlock_try('f', notify => true)")
    check_answer_session(run, obs, apid, "f", answer, error, died(a))
    if answer is not True and not died(a) and run.action != "kill":
        run.bad("a notifier's fault reached the caller: %r / %r" % (answer, error and error.pgcode))
    wait_until(lambda: fired_peek() > 0, 5)
    if run.action == "stall":
        time.sleep(STALL_MS / 1000.0)
    if not died(a) and run.action != "kill":
        try_q(a, "SELECT dlock_unlock('f')")
        got = []
        end = time.monotonic() + 15
        while time.monotonic() < end and not any(e.get("event") == "released" for e in got):
            if select.select([lis], [], [], 0.1)[0]:
                lis.poll()
                while lis.notifies:
                    got.append(json.loads(lis.notifies.pop(0).payload))
        kinds = [e.get("event") for e in got if e.get("name") == "f"]
        if "released" not in kinds:
            run.bad("the release after the notifier's %s was not announced (got %r)" % (run.action, got))
        elif "granted" not in kinds or kinds.index("granted") > kinds.index("released"):
            run.bad("the grant the notifier was sending at its %s was not sent again before the release "
                    "(got %r)" % (run.action, kinds))
    try_q(a, "SELECT dlock_unlock_all()")
    close(a, lis, obs)


def sc_unlock_update(run, point, pid):
    sc_unlock(run, point, pid, mode="update")


SCENARIOS = {
    "lock.granted": [(sc_session, "caller", ALL), (sc_xact, "caller", ALL), (sc_update, "caller", ALL)],
    "lock.ready": [(sc_session, "caller", ALL), (sc_xact, "caller", ALL)],
    "token.file": [(sc_session, "caller", ALL), (sc_detached, "holder", NO_CANCEL),
                   (sc_token_wait, "caller", ("stall",))],
    "lock.wait": [(sc_session_wait, "caller", ALL), (sc_update_wait, "caller", ALL)],
    "update.gate": [(sc_update, "caller", ALL), (sc_update_xact, "caller", ALL),
                    (sc_update_wait, "caller", ALL)],
    "update.lower": [(sc_update_lower, "caller", ASYNC)],
    "notifier.send": [(sc_notify, "any", ("error", "fatal", "terminate", "stall"))],
    "grant.confirm": [(confirming(sc_session), "caller", ALL), (confirming(sc_xact), "caller", ALL),
                      (confirming(sc_session_wait), "caller", ALL), (confirming(sc_several, skip=0), "caller", ALL),
                      (confirming(sc_permit_wait), "caller", ALL), (confirming(sc_detached), "caller", ALL),
                      (confirming(sc_detached_wait), "caller", ALL), (confirming(sc_detached_several, skip=0), "caller", ALL)],
    "lock.many": [(sc_several, "caller", ALL), (sc_several_xact, "caller", ALL)],
    "renew.marked": [(sc_renew, "caller", ALL)],
    "detached.sent": [(sc_detached, "caller", ALL)],
    "detached.many": [(sc_detached_several, "caller", ALL)],
    "detached.recorded": [(sc_detached, "caller", ALL)],
    "detached.undo": [(sc_detached_undo, "caller", ("stall", "fatal", "kill"))],
    "detached.ticket": [(sc_detached_wait, "caller", ALL)],
    "detached.waiting": [(sc_detached_wait, "caller", ALL), (sc_detached_wait_cancel, "caller", ALL)],
    "detached.line": [(sc_detached_line, "caller", ALL), (sc_detached_line_cancel, "caller", ("stall",))],
    "detached.first": [(sc_detached_line, "caller", ALL)],
    "holder.claimed": [(sc_detached, "holder", NO_CANCEL)],
    "holder.acquire": [(sc_detached, "holder", NO_CANCEL)],
    "holder.granted": [(sc_detached, "holder", NO_CANCEL)],
    "holder.token": [(sc_detached, "holder", NO_CANCEL), (sc_cancel_then_next, "holder", ("stall",))],
    "holder.loop": [(sc_detached, "holder", NO_CANCEL)],
    # (confirming: the lease started after the confirmation, by an extend
    # that a timeout bounds; a stall of the holder outlasts it)
    "holder.extend_release": [(sc_detached_extend, "holder", NO_CANCEL),
                              (confirming(sc_detached), "holder", NO_CANCEL),
                              (confirming(sc_detached, sql="SELECT dlock_acquire('f', '30s', timeout => '100ms')"),
                               "holder", ("stall",)),
                              (sc_detached_released_twice, "holder", NO_CANCEL)],
    "serve.force_release": [(sc_detached_force, "holder", NO_CANCEL),
                            (sc_detached_force_waiter, "any", NO_CANCEL)],
    "serve.release_later": [(sc_detached_min_hold, "holder", NO_CANCEL),
                            (sc_detached_min_hold_cancel, "holder", ("stall",))],
    "waiter.claimed": [(sc_detached_wait, "any", ALL)],
    "waiter.head": [(sc_permit_detached_wait, "any", ALL)],
    "permit.taken": [(sc_permit, "caller", ASYNC), (sc_permit_wait, "caller", ASYNC),
                     (sc_permit_detached, "holder", ("terminate", "stall", "kill")),
                     (sc_permit_detached_wait, "any", ASYNC)],
    "permit.head": [(sc_permit_wait, "caller", ALL), (sc_permit_wait_xact, "caller", ALL)],
    "permit.look": [(sc_permit_wait, "caller", ALL), (sc_permit_wait_xact, "caller", ALL),
                    (sc_permit_detached_wait, "any", ALL)],
    "waiter.granted": [(sc_detached_wait, "any", ALL)],
    "waiter.published": [(sc_detached_wait, "any", ALL), (sc_release_in_window, "any", ("stall",))],
    "waiter.holding": [(sc_detached_wait, "any", ("error", "fatal", "terminate", "stall", "kill"))],
    "lock.release": [(sc_unlock, "caller", ASYNC), (sc_unlock_update, "caller", ASYNC)],
    "slot.change": [(sc_slot_change, "caller", ("stall", "kill"))],
    "xact.end": [(sc_commit, "caller", ASYNC), (sc_rollback, "caller", ASYNC)],
    "subxact.end": [(sc_rollback_to, "caller", ASYNC)],
    "stats.flush": [(sc_session, "caller", ASYNC)],
    "reaper.recheck": [(sc_reaper, "reaper", ("stall", "error", "fatal", "kill")),
                       (sc_reaper_xact, "reaper", ("stall", "error"))],
}

# What a point's passing needs to be seen: a kill is checked on fewer points
# (each is a crash restart of the whole server).
KILL_POINTS = {"lock.granted", "detached.recorded", "holder.granted", "waiter.published", "reaper.recheck",
               "stats.flush", "slot.change", "permit.look"}


def points_in_sources(src):
    found = set()
    for f in sorted(os.listdir(src)):
        if f.endswith((".c", ".h")) and f not in ("fault.c", "fault.h"):
            with open(os.path.join(src, f)) as fh:
                found.update(re.findall(r'DLOCK_FAULT\("([a-z_.]+)"\)', fh.read()))
    return found


def leaks_settled(run):
    """Everything released: nothing may be left anywhere."""
    c = server_conn()
    ok = wait_until(lambda: q(c, "SELECT dlock_fault_leaks()") == "waiters=0 requests=0 holds=0 undos=0 in_line=0"
                    and q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == 0
                    and q(c, "SELECT count(*) FROM dlock_locks") == 0, 10)
    if not ok:
        run.bad("left behind: %s, %s advisory locks, %s view rows"
                % (q(c, "SELECT dlock_fault_leaks()"),
                   q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
                   q(c, "SELECT count(*) FROM dlock_locks")))
    c.close()


def one_run(point, scenario, proc, action):
    global ACTIONS_RUN
    run = Run(point, action)
    off = log_size()
    bystander = server_conn()
    bpid = pid_of(bystander)
    try:
        scenario(run, point, proc)
    except Exception as e:  # noqa: BLE001 - a scenario that breaks is a finding
        run.bad("scenario failed: %r" % e)
    hits = fired()
    log = log_since(off)
    if action == "kill":
        # a crash restart started shared memory afresh: the log says it
        hits = log.count('dlock fault point "%s": kill' % point)
    if hits == 0:
        run.bad("the point was not reached")
    # the processes come back (a crash restart, a restarted reaper or holder)
    wait_until(lambda: proc_pid("dlock lock holder") and proc_pid("dlock lease reaper"), 30)
    leaks_settled(run)
    log = log_since(off)
    if "PANIC" in log:
        run.bad("PANIC in the log")
    if "did not hold the lock" in log or "you don't own a lock" in log:
        run.bad("a process released a lock it did not hold")
    ended = set(int(p) for p in re.findall(r"lease of lock \"[^\"]*\" expired, (?:terminating|canceling the transaction of) process (\d+)", log))
    if ended - ({run.lease_victim} if run.lease_victim else set()) - run.lease_victims:
        run.bad("the reaper ended %s" % sorted(ended))
    if action != "kill" and died(bystander):
        run.bad("a bystander session was ended (pid %s)" % bpid)
    close(bystander)
    ACTIONS_RUN += 1
    name = "%s: %s (%s)" % (point, action, scenario.__name__)
    if run.problems:
        VIOLATIONS.append((name, run.problems))
        print("not ok - %s" % name, flush=True)
        for p in run.problems:
            print("#   " + p, flush=True)
    else:
        print("ok - %s" % name, flush=True)


def share_of_runs():
    """(K, N): this run makes every Nth of the (point, action) runs, from
    the Kth (counted from 0).  test/run gives each major it tests a share
    (DLOCK_FAULTS_SHARE=K/N), so that one test/run makes every run once,
    spread over the majors; DLOCK_FAULTS_ALL=1 makes every run on every
    major, as does a run of one major."""
    spec = os.environ.get("DLOCK_FAULTS_SHARE", "")
    if os.environ.get("DLOCK_FAULTS_ALL") == "1" or not spec:
        return 0, 1
    m = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        sys.exit("DLOCK_FAULTS_SHARE must be K/N with 0 <= K < N, not %r" % spec)
    return int(m.group(1)), int(m.group(2))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    ap.add_argument("--only", default=None, help="a regular expression of points to run")
    ARGS = ap.parse_args()
    fault.ARGS = ARGS
    c = server_conn()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    for sql in ("CREATE OR REPLACE FUNCTION dlock_fault_set(text, text, int, int, int) RETURNS void "
                "AS 'dlock', 'dlock_fault_set' LANGUAGE C STRICT",
                "CREATE OR REPLACE FUNCTION dlock_fault_clear() RETURNS void AS 'dlock', 'dlock_fault_clear' LANGUAGE C",
                "CREATE OR REPLACE FUNCTION dlock_fault_hits() RETURNS int AS 'dlock', 'dlock_fault_hits' LANGUAGE C",
                "CREATE OR REPLACE FUNCTION dlock_fault_leaks() RETURNS text AS 'dlock', 'dlock_fault_leaks' LANGUAGE C",
                "CREATE TABLE IF NOT EXISTS fault_commit (n int)"):
        q(c, sql)
    c.close()

    points = points_in_sources(ARGS.src)
    for p in sorted(points - set(SCENARIOS)):
        VIOLATIONS.append((p, ["a fault point without a scenario"]))
        print("not ok - %s: no scenario drives it" % p, flush=True)
    for p in sorted(set(SCENARIOS) - points):
        VIOLATIONS.append((p, ["a scenario for a point the sources do not have"]))
        print("not ok - %s: not in the sources" % p, flush=True)
    share, shares = share_of_runs()
    index = 0
    for point in sorted(points & set(SCENARIOS)):
        if ARGS.only and not re.search(ARGS.only, point):
            continue
        for scenario, proc, actions in SCENARIOS[point]:
            for action in actions:
                if action == "kill" and point not in KILL_POINTS:
                    continue
                index += 1
                if (index - 1) % shares == share:
                    one_run(point, scenario, proc, action)
    print("%d fault points, %d actions, %d violations%s"
          % (len(points), ACTIONS_RUN, len(VIOLATIONS),
             "" if shares == 1 else " (share %d of %d of the %d runs)" % (share + 1, shares, index)),
          flush=True)
    print("# all fault tests ran")
    return 0 if not VIOLATIONS else 1


if __name__ == "__main__":
    sys.exit(main())
