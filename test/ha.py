#!/usr/bin/env python3
"""test/ha.py: dlock under a real HA manager, checked as Jepsen checks a lock
service (issue 27).

A Patroni cluster of three members of the host's PostgreSQL major on loopback
ports, one etcd, dlock in shared_preload_libraries through Patroni's
configuration and a WAL archive shared by the members; clients reach the
primary through a libpq multi-host string with target_session_attrs=read-write.
Everything lives in /var/tmp/dlock-ha and is torn down whatever happens.

The workload: clients in a loop take a named lock (a session lock with a
lease, or a detached lock), read its fencing token, write to a fenced store
that lives outside the cluster (in this process) and refuses a token not
above the highest it accepted for that name, then release.  Some clients
stop past their lease while they hold a lock and write afterwards, as a
process paused by the kernel or a garbage collector does.  Every call's
start, end, answer, token and the server's recovery state are recorded.

The faults, during the workload: kill -9 of the primary's postmaster; a
Patroni switchover and a failover; the primary (its Patroni and its
postgres) stopped with SIGSTOP past the leader key's TTL and resumed (it
must come back as a replica, rewound if need be, and never take writes as a
second primary once it knows); the old primaries rejoin.

The checker, over the history:
  - per name, the store's accepted tokens strictly increase; a refused
    write carries a token not above the highest accepted before it;
  - no write is accepted from a holder after a higher token of that name was
    accepted;
  - no lock was granted with a token lower than a token of that name the
    store had accepted before the call started, except by a member that was
    primary before the last failover and did not know it yet (reported, as
    the split-brain window the manual describes; its writes are refused);
  - tokens never repeat, across the whole run, failovers included;
  - a standby never granted a lock (pg_is_in_recovery() of the granting
    statement);
  - every member ends on one timeline history, one primary, the others
    streaming from it.

    python3 test/ha.py [--seconds N] [--seed N]
        (DLOCK_HA_SECONDS, default 150; DLOCK_HA_ROUNDS: how many times each
        fault is injected, default 1)

Prints TAP-style lines; the last is "# all ha tests ran".
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg2
import yaml     # python3-yaml, which patroni depends on

BASE = "/var/tmp/dlock-ha"
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "doc", "high-availability.md")
DOC_ARCHIVE = "/var/lib/postgresql/wal-archive"
LOGS = "/tmp/dlock-ha-logs"
PGBIN = "/usr/lib/postgresql/%s/bin"
MEMBERS = ["m1", "m2", "m3"]
PG_PORT = {"m1": 25431, "m2": 25432, "m3": 25433}
REST_PORT = {"m1": 28101, "m2": 28102, "m3": 28103}
ETCD_CLIENT, ETCD_PEER = 23791, 23801
TTL = 10
NAMES = ["ha-a", "ha-b"]
LEASE_S = 2
TOKEN_SPAN = 10 ** 13
DSN = ("host=%s port=%s user=postgres dbname=postgres target_session_attrs=read-write "
       "connect_timeout=2 application_name=dlock-ha" %
       (",".join("127.0.0.1" for _ in MEMBERS), ",".join(str(PG_PORT[m]) for m in MEMBERS)))

RESULTS = []
STOP = threading.Event()
T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def report(ok, what, detail=""):
    RESULTS.append(ok)
    print(("ok - " if ok else "not ok - ") + what + (("\n#   " + detail.replace("\n", "\n#   ")) if detail and not ok else ""),
          flush=True)


def note(text):
    print("# [%6.1f s] %s" % (now(), text), flush=True)


# ---- the cluster --------------------------------------------------------------

PROCS = {}          # what we started: name -> Popen (its own process group)


def as_postgres(args, log, env=None):
    f = open(log, "ab")
    return subprocess.Popen(["runuser", "-u", "postgres", "--"] + args, stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)


def doc_config():
    """What doc/high-availability.md says dlock needs in Patroni's
    configuration (its yaml block under "With Patroni"), with the test's
    archive in place of the page's."""
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index("## With Patroni"):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return yaml.safe_load(block.replace(DOC_ARCHIVE, os.path.join(BASE, "archive")))


def merged(a, b):
    """b over a, dictionaries merged key by key."""
    out = dict(a)
    for k, v in b.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def member_config(m, major):
    """The test's own settings (ports, directories, the DCS, authentication),
    and over them the page's."""
    return merged(test_config(m, major), doc_config())


def test_config(m, major):
    return {
        "scope": "dlock-ha", "namespace": "/dlock-test/", "name": m,
        "restapi": {"listen": "127.0.0.1:%d" % REST_PORT[m], "connect_address": "127.0.0.1:%d" % REST_PORT[m]},
        # etcd's v2 API: with the v3 one (etcd3), Debian 12's Patroni 3.0.2 let
        # a leader stopped past the TTL take the leader key back when it
        # resumed, after another member had been promoted; the new primary
        # demoted itself and was rewound onto the old timeline (this test
        # found it: doc/high-availability.md)
        "etcd": {"host": "127.0.0.1:%d" % ETCD_CLIENT},
        "log": {"level": "INFO"},
        "bootstrap": {
            "dcs": {
                "ttl": TTL, "loop_wait": 1, "retry_timeout": 3, "maximum_lag_on_failover": 16 * 1024 * 1024,
                "postgresql": {
                    "use_slots": True,
                    "parameters": {
                        "max_connections": 40, "max_wal_senders": 10, "max_replication_slots": 10,
                        "wal_keep_size": "128MB",
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                       "host replication all 127.0.0.1/32 trust"],
        },
        "postgresql": {
            "listen": "127.0.0.1:%d" % PG_PORT[m], "connect_address": "127.0.0.1:%d" % PG_PORT[m],
            "data_dir": os.path.join(BASE, m), "bin_dir": PGBIN % major,
            "pgpass": os.path.join(BASE, "pgpass-" + m),
            "authentication": {"superuser": {"username": "postgres"},
                               "replication": {"username": "postgres"},
                               "rewind": {"username": "postgres"}},
            "parameters": {"unix_socket_directories": BASE, "port": PG_PORT[m]},
        },
        "watchdog": {"mode": "off"},
        "tags": {},
    }


def rest(m, path, body=None, timeout=3):
    url = "http://127.0.0.1:%d%s" % (REST_PORT[m], path)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text.startswith("{") else text)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except Exception as e:  # noqa: BLE001 - a member that does not answer
        return None, str(e)


def cluster_state():
    """{member: (role, state, timeline)} from any member that answers."""
    for m in MEMBERS:
        code, body = rest(m, "/cluster")
        if code == 200 and isinstance(body, dict):
            return {x["name"]: (x.get("role"), x.get("state"), x.get("timeline")) for x in body.get("members", [])}
    return {}


def leader():
    for m, (role, state, _tl) in cluster_state().items():
        if role == "leader" and state == "running":
            return m
    return None


def wait_for(cond, timeout, step=0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def healthy():
    """One leader running, the others streaming replicas, all on one timeline."""
    st = cluster_state()
    if len(st) != len(MEMBERS):
        return False
    roles = [r for r, _s, _t in st.values()]
    tls = set(t for _r, _s, t in st.values())
    return (roles.count("leader") == 1 and all(s in ("running", "streaming") for _r, s, _t in st.values())
            and len(tls) == 1 and None not in tls)


def postmaster_pid(m):
    try:
        with open(os.path.join(BASE, m, "postmaster.pid")) as f:
            return int(f.readline().strip())
    except (OSError, ValueError):
        return None


def groups_of(m):
    """The process groups of member m: its Patroni's and its postmaster's."""
    out = set()
    p = PROCS.get(m)
    if p is not None and p.poll() is None:
        out.add(os.getpgid(p.pid))
    pm = postmaster_pid(m)
    if pm:
        try:
            out.add(os.getpgid(pm))
        except ProcessLookupError:
            pass
    return out


def signal_member(m, sig):
    for g in groups_of(m):
        try:
            os.killpg(g, sig)
        except ProcessLookupError:
            pass


def start_member(m):
    PROCS[m] = as_postgres(["patroni", os.path.join(BASE, m + ".yml")], os.path.join(BASE, m + ".log"))


def teardown():
    for m in MEMBERS:
        signal_member(m, signal.SIGCONT)
        signal_member(m, signal.SIGKILL)
    for p in PROCS.values():
        try:
            os.killpg(os.getpgid(p.pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    # anything left that runs from our directory (a postmaster Patroni started)
    subprocess.run(["pkill", "-9", "-f", BASE], check=False)
    time.sleep(0.5)
    # the members' and etcd's logs stay for a look after the run
    if os.path.isdir(BASE):
        shutil.rmtree(LOGS, ignore_errors=True)
        os.makedirs(LOGS)
        for f in os.listdir(BASE):
            if f.endswith(".log"):
                shutil.copy(os.path.join(BASE, f), LOGS)
        for m in MEMBERS:
            pglog = os.path.join(BASE, m, "log")
            if os.path.isdir(pglog):
                shutil.copytree(pglog, os.path.join(LOGS, m + "-pglog"))
    shutil.rmtree(BASE, ignore_errors=True)


def setup(major):
    teardown()
    os.makedirs(os.path.join(BASE, "archive"))
    for m in MEMBERS:
        with open(os.path.join(BASE, m + ".yml"), "w") as f:
            json.dump(member_config(m, major), f, indent=1)    # YAML is a superset of JSON
    subprocess.run(["chown", "-R", "postgres:postgres", BASE], check=True)
    os.chmod(BASE, 0o700)
    PROCS["etcd"] = as_postgres(
        ["etcd", "--name", "dlock-ha", "--data-dir", os.path.join(BASE, "etcd"),
         "--listen-client-urls", "http://127.0.0.1:%d" % ETCD_CLIENT,
         "--advertise-client-urls", "http://127.0.0.1:%d" % ETCD_CLIENT,
         "--listen-peer-urls", "http://127.0.0.1:%d" % ETCD_PEER,
         "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % ETCD_PEER,
         "--initial-cluster", "dlock-ha=http://127.0.0.1:%d" % ETCD_PEER, "--enable-v2=true"],
        os.path.join(BASE, "etcd.log"))
    time.sleep(1)
    start_member("m1")
    if not wait_for(lambda: leader() == "m1", 60):
        return "m1 never became the leader"
    for m in MEMBERS[1:]:
        start_member(m)
    if not wait_for(healthy, 90):
        return "the members never became one primary and two streaming replicas: %r" % cluster_state()
    c = connect()
    q(c, "CREATE EXTENSION dlock")
    c.close()
    return None


def connect(dsn=DSN):
    c = psycopg2.connect(dsn)
    c.autocommit = True
    return c


def q(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone() if cur.description else None


# ---- the fenced store and the history ------------------------------------------

class Store:
    """A resource outside the cluster that keeps, per name, the highest token
    it accepted and refuses every write whose token is not above it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.high = {}
        self.log = []           # (time, name, token, client, accepted, high before)

    def write(self, name, token, client):
        with self.lock:
            before = self.high.get(name, 0)
            ok = token > before
            if ok:
                self.high[name] = token
            self.log.append((now(), name, token, client, ok, before))
            return ok


STORE = Store()
HISTORY = []            # dicts: client, op, name, start, end, token, answer, recovery, error, port
HLOCK = threading.Lock()


def record(**op):
    with HLOCK:
        HISTORY.append(op)


class Client(threading.Thread):
    def __init__(self, idx, kind, seed, pause_p):
        super().__init__(daemon=True)
        self.idx, self.kind, self.pause_p = idx, kind, pause_p
        self.rng = random.Random(seed * 100 + idx)

    def run(self):
        conn = None
        while not STOP.is_set():
            name = self.rng.choice(NAMES)
            start = now()
            try:
                if conn is None:
                    conn = connect()
                if self.kind == "session":
                    got, token, rec, port = self.take_session(conn, name)
                else:
                    token, rec, port = q(conn, "SELECT dlock_acquire(%s, %s), pg_is_in_recovery(), "
                                               "inet_server_port()", (name, "%d s" % LEASE_S))
                    got = token is not None
                record(client=self.idx, op="acquire", kind=self.kind, name=name, start=start, end=now(),
                       answer=got, token=token, recovery=rec, port=port, error=None)
            except psycopg2.Error as e:
                record(client=self.idx, op="acquire", kind=self.kind, name=name, start=start, end=now(),
                       answer=None, token=None, recovery=None, port=None, error=e.pgcode or "connection")
                conn = self.drop(conn)
                continue
            if not got:
                time.sleep(self.rng.uniform(0.01, 0.05))
                continue
            # the work: now and then the client stops past its lease
            if self.rng.random() < self.pause_p:
                record(client=self.idx, op="pause", name=name, start=now(), end=now() + LEASE_S + 1,
                       token=token)
                time.sleep(LEASE_S + 1)
            else:
                time.sleep(self.rng.uniform(0, 0.03))
            wstart = now()
            ok = STORE.write(name, token, self.idx)
            record(client=self.idx, op="write", name=name, start=wstart, end=now(), token=token, answer=ok)
            try:
                if self.kind == "session":
                    q(conn, "SELECT dlock_unlock(%s)", (name,))
                else:
                    q(conn, "SELECT dlock_release(%s, %s)", (name, token))
            except psycopg2.Error:
                conn = self.drop(conn)
        self.drop(conn)

    def take_session(self, conn, name):
        got, rec, port = q(conn, "SELECT dlock_try(%s, lease => %s), pg_is_in_recovery(), inet_server_port()",
                           (name, "%d s" % LEASE_S))
        token = q(conn, "SELECT dlock_token(%s)", (name,))[0] if got else None
        return got, token, rec, port

    def drop(self, conn):
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        if not STOP.is_set():
            time.sleep(0.2)
        return None


# ---- the faults ------------------------------------------------------------------

FAULTS = []             # (start, end, what, leader before, leader after)


def fault_kill9():
    m = leader()
    pm = postmaster_pid(m)
    os.kill(pm, signal.SIGKILL)
    return m, "kill -9 of the primary's postmaster (%s)" % m


def fault_switchover():
    m = leader()
    cand = next(x for x in MEMBERS if x != m)
    code, body = rest(m, "/switchover", {"leader": m, "candidate": cand}, timeout=30)
    return m, "switchover %s -> %s (%s)" % (m, cand, code)


def fault_failover():
    m = leader()
    cand = [x for x in MEMBERS if x != m][-1]
    code, body = rest(cand, "/failover", {"candidate": cand}, timeout=30)
    return m, "failover to %s (%s)" % (cand, code)


def fault_sigstop():
    m = leader()
    signal_member(m, signal.SIGSTOP)
    time.sleep(TTL + 4)
    new = leader()
    note("before the resume: %r" % cluster_state())
    signal_member(m, signal.SIGCONT)
    return m, "the primary %s (Patroni and postgres) stopped %d s, past the TTL; %s took over" % (m, TTL + 4, new)


def fault_diverge():
    """The whole primary (its Patroni and its postgres) killed with WAL its
    replicas never received (its WAL senders stopped first); a replica is
    promoted; the old primary, started again, has diverged and rejoins
    through pg_rewind."""
    m = leader()
    direct = connect("host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=2" % PG_PORT[m])
    with direct.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'")
        senders = [r[0] for r in cur.fetchall()]
    for pid in senders:
        os.kill(pid, signal.SIGSTOP)
    q(direct, "CREATE TABLE IF NOT EXISTS ha_diverged (n int)")
    q(direct, "INSERT INTO ha_diverged SELECT generate_series(1, 10000)")
    direct.close()
    signal_member(m, signal.SIGKILL)
    for pid in senders:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    PROCS.pop(m, None)
    new = wait_for(lambda: leader() not in (None, m) and leader(), TTL + 30)
    start_member(m)
    return m, "the primary %s killed (Patroni and postgres) with WAL its replicas never got; %s promoted; %s started again" % (
        m, new, m)


def run_faults(rounds):
    plan = [fault_kill9, fault_switchover, fault_failover, fault_sigstop, fault_diverge] * rounds
    for f in plan:
        if STOP.is_set():
            break
        time.sleep(4)           # the workload runs between faults
        if not wait_for(healthy, 90):
            note("the cluster did not settle before the next fault: %r" % cluster_state())
        start = now()
        try:
            before, what = f()
        except Exception as e:  # noqa: BLE001
            before, what = None, "%s failed: %r" % (f.__name__, e)
        note(what)
        # (a fault takes a moment to show: a member's state changes after it)
        wait_for(lambda: not healthy(), 5)
        settled = wait_for(healthy, 120)
        FAULTS.append((start, now(), what, before, leader(), bool(settled)))
        note("settled: %s, leader %s, %r" % (bool(settled), leader(), cluster_state()))


# ---- the checker ----------------------------------------------------------------

def check(sigstop_windows, final_timeline):
    acquires = [h for h in HISTORY if h["op"] == "acquire"]
    grants = [h for h in acquires if h["answer"]]
    writes = STORE.log
    report(len(grants) >= 50 and sum(1 for w in writes if w[4]) >= 50,
           "history: %d acquisitions (%d granted, %d errors), %d writes (%d accepted, %d refused), %d pauses"
           % (len(acquires), len(grants), sum(1 for h in acquires if h["error"]), len(writes),
              sum(1 for w in writes if w[4]), sum(1 for w in writes if not w[4]),
              sum(1 for h in HISTORY if h["op"] == "pause")))
    # per name, accepted tokens strictly increase; refused ones were not above
    bad = []
    for name in NAMES:
        high = 0
        for t, n, tok, cl, ok, before in writes:
            if n != name:
                continue
            if ok and tok <= high:
                bad.append("%s: accepted %d after %d" % (name, tok, high))
            if not ok and tok > high:
                bad.append("%s: refused %d above the highest accepted %d" % (name, tok, high))
            if ok:
                high = tok
    report(not bad, "the store: per name, accepted tokens strictly increase; every refused one was not above "
                    "the highest accepted", "; ".join(bad[:10]))
    # tokens never repeat
    seen = {}
    dup = []
    for h in grants:
        if h["token"] is None:
            dup.append("client %d was granted %s without a token" % (h["client"], h["name"]))
            continue
        if h["token"] in seen:
            dup.append("token %d twice (%s)" % (h["token"], h["name"]))
        seen[h["token"]] = h
    report(not dup, "tokens: %d grants, every one with a token of its own, failovers included" % len(grants),
           "; ".join(dup[:10]))
    # a standby never granted
    standby = [h for h in grants if h["recovery"]]
    report(not standby, "no lock granted by a standby", "; ".join(
        "client %d, %s, token %s, port %s" % (h["client"], h["name"], h["token"], h["port"]) for h in standby[:10]))
    # no grant below a token already accepted when the call began
    stale, window = [], []
    for h in grants:
        higher = [w for w in writes if w[1] == h["name"] and w[4] and w[2] > h["token"] and w[0] < h["start"]]
        if not higher:
            continue
        tl = h["token"] // TOKEN_SPAN
        newest_tl = max(w[2] // TOKEN_SPAN for w in higher)
        line = ("client %d granted %s with token %d (timeline %d) at %.1f s, after %d (timeline %d) was accepted"
                % (h["client"], h["name"], h["token"], tl, h["start"], max(w[2] for w in higher), newest_tl))
        if tl < newest_tl and any(a - 1 <= h["start"] <= b + 5 and h["port"] == PG_PORT[m]
                                  for a, b, m in sigstop_windows):
            window.append(line)
        else:
            stale.append(line)
    report(not stale, "no client was told it holds a lock with a token below one of that name already accepted "
                      "(%d such grants by a stopped old primary that did not know yet, as it resumed)"
                      % len(window), "; ".join(stale[:10]))
    for line in window[:5]:
        print("#   " + line, flush=True)
    # a write accepted after a higher token was: covered by the store check;
    # and every stale holder's write was refused
    accepted_stale = []
    for h in grants:
        for t, n, tok, cl, ok, before in writes:
            if tok == h["token"] and ok and before >= tok:
                accepted_stale.append("token %d accepted after %d" % (tok, before))
    report(not accepted_stale, "no write accepted from a holder after a higher token of its name",
           "; ".join(accepted_stale[:10]))
    # the faults each happened, and the cluster came back every time
    tls = sorted(set(h["token"] // TOKEN_SPAN for h in grants if h["token"]))
    accepted_tls = [w[2] // TOKEN_SPAN for w in writes if w[4]]
    report(final_timeline is not None and final_timeline >= max(accepted_tls or [0]),
           "the cluster never went back to an older timeline: it ends on timeline %s, the newest accepted "
           "token's is %s" % (final_timeline, max(accepted_tls or [0])))
    for start, end, what, before, after, settled in FAULTS:
        print("# fault at %.1f s (%.1f s to settle): %s; leader before %s, after %s" % (start, end - start, what,
                                                                                  before, after), flush=True)
    report(all(f[5] for f in FAULTS) and len(FAULTS) >= 5,
           "faults: %d injected (kill -9, switchover, failover, SIGSTOP past the TTL, a diverged primary "
           "killed), the cluster back to one primary and two streaming replicas after each; tokens of "
           "timelines %s" % (len(FAULTS), tls))
    rewinds = sum(open(os.path.join(BASE, m + ".log"), errors="replace").read().count("pg_rewind exit code=0")
                  for m in MEMBERS if os.path.exists(os.path.join(BASE, m + ".log")))
    report(rewinds >= 1, "an old primary rejoined through pg_rewind (%d times)" % rewinds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=None, help="(ignored: the suite makes its own cluster)")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("DLOCK_HA_SECONDS", "0")) or None)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("DLOCK_HA_ROUNDS", "1")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DLOCK_HA_SEED", "0")) or None)
    ap.add_argument("--major", default=os.environ.get("PG_MAJOR", "15"))
    args = ap.parse_args()
    seed = args.seed or random.randrange(1, 10 ** 9)
    print("# seed %d" % seed, flush=True)
    try:
        problem = setup(args.major)
        report(problem is None, "a Patroni cluster: three members of PostgreSQL %s, etcd, dlock preloaded, "
                                "one primary and two streaming replicas" % args.major, problem or "")
        if problem is not None:
            return 1
        clients = [Client(i, "session" if i % 2 == 0 else "detached", seed, 0.05) for i in range(6)]
        for c in clients:
            c.start()
        sigstop = []
        faults = threading.Thread(target=run_faults, args=(args.rounds,), daemon=True)
        faults.start()
        deadline = time.monotonic() + (args.seconds or 600)
        while faults.is_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        STOP.set()
        for c in clients:
            c.join(15)
        for start, end, what, before, _a, _s in FAULTS:
            if what.startswith("the primary"):
                sigstop.append((start, end, before))
        wait_for(healthy, 30)
        final = set(t for _r, _s, t in cluster_state().values())
        check(sigstop, max(final) if final and None not in final else None)
        report(wait_for(healthy, 30) is True, "at the end: one primary, two streaming replicas, one timeline: %r"
               % cluster_state())
    finally:
        teardown()
    report(not os.path.exists(BASE) and subprocess.run(["pgrep", "-f", BASE], capture_output=True).returncode != 0,
           "torn down: no process and no file of the cluster left")
    print("# all ha tests ran", flush=True)
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
