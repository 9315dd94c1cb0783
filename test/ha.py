#!/usr/bin/env python3
"""test/ha.py: dlock under a real HA manager, checked as Jepsen checks a lock
service (issue 27).

A Patroni cluster of three members of the host's PostgreSQL major on loopback
ports, one etcd, the configuration doc/high-availability.md gives (dlock in
shared_preload_libraries, synchronous_mode with dlock.synchronous_grants, a
WAL archive shared by the members); clients reach the primary through a
libpq multi-host string with target_session_attrs=read-write.  Everything
lives in /var/tmp/dlock-ha and is torn down whatever happens.

The workload: clients in a loop take a named lock (a session lock with a
lease, or a detached lock), read its fencing token, write to a fenced store
that lives outside the cluster (in this process) and refuses a token not
above the highest it accepted for that name, then release.  Some clients
stop past their lease while they hold a lock and write afterwards, as a
process paused by the kernel or a garbage collector does.  Every call's
start, end, answer and token and the server's recovery state are recorded.

The faults, during the workload: kill -9 of the primary's postmaster; a
Patroni switchover and a failover; the primary (its Patroni and its
postgres) stopped with SIGSTOP past the leader key's TTL and resumed, a call
sent to it meanwhile once the store has a token of the new primary's (it
must not come back true); a primary with WAL its replicas never got, killed
and rejoining through pg_rewind.

The checker, over the history:
  - per name, the store's accepted tokens strictly increase; a refused
    write carries a token not above the highest accepted before it;
  - no write is accepted from a holder after a higher token of that name was
    accepted;
  - no client was told it holds a lock with a token lower than a token of
    that name the store had accepted before the call started (the stopped
    primary's resume included);
  - tokens never repeat, across the whole run, failovers included;
  - a standby never granted a lock (pg_is_in_recovery() of the granting
    statement);
  - the cluster never goes back to an older timeline, and every member ends
    on one timeline, one primary, the others streaming from it.

Then each language's failover program (test/clients/run --failover) holds a
lock through a switchover: its old connection fails as the manual's table
says for its driver, and it takes the lock again on the new primary with a
token of a later timeline.

    python3 test/ha.py [--seconds N] [--seed N]
        (DLOCK_HA_SECONDS: a time limit, default 600; DLOCK_HA_ROUNDS: how
        many times each fault is injected, default 1; DLOCK_HA_NO_LANGUAGES=1
        leaves out the languages)

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
PROBE = "ha-probe"      # the name fault_sigstop asks the stopped primary for
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
    """One leader running, the others streaming replicas (one of them its
    synchronous standby), all on one timeline."""
    st = cluster_state()
    if len(st) != len(MEMBERS):
        return False
    roles = [r for r, _s, _t in st.values()]
    tls = set(t for _r, _s, t in st.values())
    return (roles.count("leader") == 1 and roles.count("sync_standby") == 1
            and all(s in ("running", "streaming") for _r, s, _t in st.values())
            and len(tls) == 1 and None not in tls)


def sync_standby():
    for m, (role, _s, _tl) in cluster_state().items():
        if role == "sync_standby":
            return m
    return None


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


def child_main(idx, kind, seed, t0):
    """A client, as a process of its own (so that it can be stopped): it
    loops over take, write, release, and says each step on stdout as a JSON
    line; a write is a request that the harness answers on stdin ("1": the
    store accepted it).  Ends at the end of stdin."""
    global T0
    T0 = t0
    rng = random.Random(seed * 100 + idx)

    def send(**op):
        sys.stdout.write(json.dumps(op) + "\n")
        sys.stdout.flush()

    def drop(conn):
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
        time.sleep(0.2)
        return None

    conn = None
    while True:
        name = rng.choice(NAMES)
        start = now()
        try:
            if conn is None:
                conn = connect()
            if kind == "session":
                got, rec, port = q(conn, "SELECT dlock_try(%s, lease => %s), pg_is_in_recovery(), "
                                         "inet_server_port()", (name, "%d s" % LEASE_S))
                token = q(conn, "SELECT dlock_token(%s)", (name,))[0] if got else None
            else:
                token, rec, port = q(conn, "SELECT dlock_acquire(%s, %s), pg_is_in_recovery(), "
                                           "inet_server_port()", (name, "%d s" % LEASE_S))
                got = token is not None
            send(op="acquire", kind=kind, name=name, start=start, end=now(), answer=got, token=token,
                 recovery=rec, port=port, error=None)
        except psycopg2.Error as e:
            send(op="acquire", kind=kind, name=name, start=start, end=now(), answer=None, token=None,
                 recovery=None, port=None, error=e.pgcode or "connection")
            conn = drop(conn)
            continue
        if not got:
            time.sleep(rng.uniform(0.01, 0.05))
            continue
        # the work (the harness may stop this process meanwhile), then the write
        send(op="hold", name=name, token=token)
        time.sleep(rng.uniform(0, 0.03))
        send(op="write", name=name, start=now(), token=token)
        if not sys.stdin.readline():
            break
        start = now()
        try:
            if kind == "session":
                released = q(conn, "SELECT dlock_unlock(%s)", (name,))[0]
            else:
                released = q(conn, "SELECT dlock_release(%s, %s)", (name, token))[0]
            send(op="release", kind=kind, name=name, start=start, end=now(), token=token, answer=released,
                 error=None)
        except psycopg2.Error as e:
            send(op="release", kind=kind, name=name, start=start, end=now(), token=token, answer=None,
                 error=e.pgcode or "connection")
            conn = drop(conn)


class Client(threading.Thread):
    """The harness's side of a client process (child_main): records what it
    says, answers its writes from the store, and now and then stops it
    (SIGSTOP) past its lease while it holds a lock, as the kernel, a
    debugger or a garbage collector stops a process."""

    def __init__(self, idx, kind, seed, pause_p):
        super().__init__(daemon=True)
        self.idx, self.kind, self.pause_p = idx, kind, pause_p
        self.rng = random.Random(seed * 100 + idx + 50)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(idx), kind,
                                      str(seed), repr(T0)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def run(self):
        for line in self.proc.stdout:
            op = json.loads(line)
            if op["op"] == "hold":
                if not STOP.is_set() and self.rng.random() < self.pause_p:
                    start = now()
                    self.proc.send_signal(signal.SIGSTOP)
                    time.sleep(LEASE_S + 1)
                    self.proc.send_signal(signal.SIGCONT)
                    record(client=self.idx, op="pause", name=op["name"], start=start, end=now(),
                           token=op["token"])
                continue
            if op["op"] == "write":
                ok = STORE.write(op["name"], op["token"], self.idx)
                record(client=self.idx, op="write", name=op["name"], start=op["start"], end=now(),
                       token=op["token"], answer=ok)
                if STOP.is_set():
                    break
                try:
                    self.proc.stdin.write("1\n" if ok else "0\n")
                except (OSError, ValueError):     # (closed by stop())
                    break
                continue
            record(client=self.idx, **op)
        self.stop()

    def stop(self):
        """Ends the process (at the end of the run, whatever it was doing)."""
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()


# ---- the faults ------------------------------------------------------------------

FAULTS = []             # (start, end, what, leader before, leader after)


def fault_kill9():
    m = leader()
    pm = postmaster_pid(m)
    os.kill(pm, signal.SIGKILL)
    return m, "kill -9 of the primary's postmaster (%s)" % m


def fault_switchover():
    """(synchronous_mode: Patroni switches over to its synchronous standby only)"""
    m, cand = leader(), sync_standby()
    code, body = rest(m, "/switchover", {"leader": m, "candidate": cand}, timeout=30)
    return m, "switchover %s -> %s (%s)" % (m, cand, code)


def fault_failover():
    m, cand = leader(), sync_standby()
    code, body = rest(cand, "/failover", {"candidate": cand}, timeout=30)
    return m, "failover to %s (%s)" % (cand, code)


def take_on_primary(name, client):
    """name taken on the primary, its token written to the store, released:
    recorded as client's."""
    c = connect()
    start = now()
    got, rec, port = q(c, "SELECT dlock_try(%s), pg_is_in_recovery(), inet_server_port()", (name,))
    token = q(c, "SELECT dlock_token(%s)", (name,))[0] if got else None
    record(client=client, op="acquire", kind="session", name=name, start=start, end=now(), answer=got,
           token=token, recovery=rec, port=port, error=None)
    if got:
        ok = STORE.write(name, token, client)
        record(client=client, op="write", name=name, start=now(), end=now(), token=token, answer=ok)
        start = now()
        released = q(c, "SELECT dlock_unlock(%s)", (name,))[0]
        record(client=client, op="release", kind="session", name=name, start=start, end=now(), token=token,
               answer=released, error=None)
    c.close()
    return token


def probe(conn, name, done):
    """A call sent to the stopped old primary, recorded as a client's (-1):
    it must not come back true once the store has a newer token."""
    start = now()
    try:
        got, rec, port = q(conn, "SELECT dlock_try(%s, lease => %s), pg_is_in_recovery(), inet_server_port()",
                           (name, "%d s" % LEASE_S))
        token = q(conn, "SELECT dlock_token(%s)", (name,))[0] if got else None
        record(client=-1, op="acquire", kind="session", name=name, start=start, end=now(), answer=got,
               token=token, recovery=rec, port=port, error=None)
        done.append("answered %s, token %s" % (got, token))
        if got:
            ok = STORE.write(name, token, -1)
            record(client=-1, op="write", name=name, start=now(), end=now(), token=token, answer=ok)
    except psycopg2.Error as e:
        record(client=-1, op="acquire", kind="session", name=name, start=start, end=now(), answer=None,
               token=None, recovery=None, port=None, error=e.pgcode or "connection")
        done.append("ended by %s" % (e.pgcode or "the connection's end"))


def fault_sigstop():
    """The primary stopped past the TTL; once another member is primary and
    the store has accepted a token of its timeline, a call is sent to the
    stopped one (it sits in the socket until the resume)."""
    m = leader()
    conn = connect("host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=2 "
                   "application_name=dlock-ha-probe" % PG_PORT[m])
    tl = int(q(conn, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")[0])
    signal_member(m, signal.SIGSTOP)
    start = time.monotonic()
    newer = wait_for(lambda: any(w[4] and w[2] // TOKEN_SPAN > tl for w in list(STORE.log)), TTL + 40)
    new = leader()
    # a name nobody holds on the stopped primary, taken on the new one
    # first: the stopped one would grant it when it resumes, below a token
    # the store has accepted
    try:
        take_on_primary(PROBE, -2)
    except psycopg2.Error as e:
        note("%s could not be taken on the new primary: %s" % (PROBE, e))
    done = []
    prober = threading.Thread(target=probe, args=(conn, PROBE, done), daemon=True)
    prober.start()
    time.sleep(max(0.5, TTL + 4 - (time.monotonic() - start)))
    stopped = time.monotonic() - start
    note("before the resume: %r" % cluster_state())
    signal_member(m, signal.SIGCONT)
    prober.join(60)
    conn.close()
    return m, ("the primary %s (Patroni and postgres) stopped %.0f s, past the TTL; %s took over; a call sent "
               "to %s once the store had a token of a later timeline (%s): %s"
               % (m, stopped, new, m, "yes" if newer else "not seen", done[0] if done else "no answer"))


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
    # (its synchronous standby gets none of it either: commit locally)
    q(direct, "SET synchronous_commit = local")
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


# ---- each language through a switchover ------------------------------------------

CLIENTS_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "run")
LANGS = ["java", "go", "node", "ruby", "php", "python"]
DRIVER = {"java": "pgjdbc", "go": "pgx", "node": "node-postgres", "ruby": "ruby-pg", "php": "PDO pgsql",
          "python": "psycopg 3"}


def doc_driver_rows():
    """The rows of the table under "What each driver sees" in
    doc/high-availability.md: driver -> the row's text."""
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index("### What each driver sees"):]
    rows = {}
    for line in section.split("\n"):
        if line.startswith("| ") and not line.startswith("| driver") and not line.startswith("| ---"):
            rows[line.split("|")[1].strip()] = line
        elif rows and not line.startswith("|"):
            break
    return rows


def lost_facts(line):
    """What a "lost ..." line says that the manual's row must say too: the
    class raised (its last name), the SQLSTATE or code, or that there is
    none, and the server's message."""
    facts = [c.split(".")[-1].lstrip("*") for c in re.findall(r"[\w.*]*(?:Exception|Error|Bad)\b", line)]
    facts += re.findall(r"\b(?:57P01|HY000)\b", line)
    if "no SQLSTATE" in line:
        facts.append("no SQLSTATE")
    for text in ("terminating connection due to administrator command",
                 "Client has encountered a connection error and is not queryable"):
        if text in line:
            facts.append(text)
    return sorted(set(facts))


def language_failover():
    """Each language's failover program (test/clients/<lang>/failover.*)
    holds a lock on the primary through a switchover: the old connection
    fails as doc/high-availability.md says for its driver, and the program
    takes the lock again on the new primary with a larger token, of a later
    timeline."""
    out, go = os.path.join(BASE, "langs"), os.path.join(BASE, "langs-go")
    hosts = ",".join("127.0.0.1:%d" % PG_PORT[m] for m in MEMBERS)
    log = open(os.path.join(BASE, "langs.log"), "wb")
    runner = subprocess.Popen(["bash", CLIENTS_RUN, "--failover", hosts, "--go", go, "--out", out] + LANGS,
                              stdout=log, stderr=subprocess.STDOUT)

    def lines(lang):
        try:
            return open(os.path.join(out, lang + ".out"), errors="replace").read().split("\n")
        except OSError:
            return []

    def field(lang, word):
        return next((l.split()[1:] for l in lines(lang) if l.startswith(word + " ")), None)

    # (the first Go build of pgx takes a while on a new machine)
    wait_for(lambda: all(field(l, "held") for l in LANGS) or runner.poll() is not None, 240)
    old, cand = leader(), sync_standby()
    code, _body = rest(old, "/switchover", {"leader": old, "candidate": cand}, timeout=30)
    # the programs go on as soon as the switchover is done: their reconnecting
    # takes as long as the new primary needs to take writes
    open(go, "w").close()
    switched = wait_for(lambda: leader() == cand, 60) and wait_for(healthy, 60)
    note("languages: switchover %s -> %s (%s), settled: %s" % (old, cand, code, bool(switched)))
    try:
        runner.wait(timeout=150)
    except subprocess.TimeoutExpired:
        runner.kill()
    rows = doc_driver_rows()
    for lang in LANGS:
        held, retaken = field(lang, "held"), field(lang, "retaken")
        lost = next((l for l in lines(lang) if l.startswith("lost ")), None)
        problems = [l for l in lines(lang) if l.startswith("not ok")]
        if not held or not retaken or not lost:
            problems.append("no held, lost and retaken lines: %r" % lines(lang)[-5:])
        else:
            t1, p1, t2, p2 = int(held[0]), int(held[1]), int(retaken[0]), int(retaken[1])
            if p1 != PG_PORT[old] or p2 != PG_PORT[cand]:
                problems.append("held on port %d, retaken on %d; the primary was %d, then %d"
                                % (p1, p2, PG_PORT[old], PG_PORT[cand]))
            if not t2 // TOKEN_SPAN > t1 // TOKEN_SPAN:
                problems.append("token %d, then %d: not of a later timeline" % (t1, t2))
            row = rows.get(DRIVER[lang], "")
            missing = [f for f in lost_facts(lost) if f not in row]
            if not row or missing or lost.startswith("lost none"):
                problems.append("%s; doc/high-availability.md's row for %s does not say %s"
                                % (lost, DRIVER[lang], missing or "it"))
        report(not problems and bool(switched), "%s (%s): a lock held through a switchover is lost as the "
                                                "manual says (%s), and taken again on the new primary with "
                                                "a token of a later timeline in %s s"
               % (lang, DRIVER[lang], "; ".join(lost_facts(lost or "")), retaken[2] if retaken else "?"),
               "; ".join(problems))


# ---- the checker ----------------------------------------------------------------

def check(final_timeline):
    acquires = [h for h in HISTORY if h["op"] == "acquire"]
    grants = [h for h in acquires if h["answer"]]
    releases = [h for h in HISTORY if h["op"] == "release"]
    writes = STORE.log
    report(len(grants) >= 50 and sum(1 for w in writes if w[4]) >= 50,
           "history: %d acquisitions (%d granted, the longest in %.2f s; %d errors), %d writes (%d accepted, "
           "%d refused), %d pauses, %d releases (%d true, %d false, %d errors)"
           % (len(acquires), len(grants), max([h["end"] - h["start"] for h in grants] or [0]),
              sum(1 for h in acquires if h["error"]), len(writes),
              sum(1 for w in writes if w[4]), sum(1 for w in writes if not w[4]),
              sum(1 for h in HISTORY if h["op"] == "pause"), len(releases),
              sum(1 for h in releases if h["answer"] is True), sum(1 for h in releases if h["answer"] is False),
              sum(1 for h in releases if h["error"])))
    # per name, accepted tokens strictly increase; refused ones were not above
    bad = []
    for name in sorted(set(w[1] for w in writes)):
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
    # no grant below a token already accepted when the call began: with
    # dlock.synchronous_grants, not even from a primary stopped past the TTL
    # as it resumes (its grants wait for a synchronous standby that now
    # follows, or is, another primary, until its Patroni demotes it)
    stale = []
    for h in grants:
        higher = [w[2] for w in writes if w[1] == h["name"] and w[4] and w[2] > h["token"] and w[0] < h["start"]]
        if higher:
            stale.append("client %d granted %s with token %d (timeline %d) at %.1f s, after %d (timeline %d) "
                         "was accepted" % (h["client"], h["name"], h["token"], h["token"] // TOKEN_SPAN, h["start"],
                                           max(higher), max(higher) // TOKEN_SPAN))
    report(not stale, "no client was told it holds a lock after a higher token of that name had been accepted, "
                      "the stopped primary's resume included", "; ".join(stale[:10]))
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
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        try:
            child_main(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
        except (KeyboardInterrupt, BrokenPipeError):
            pass
        return 0
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
        faults = threading.Thread(target=run_faults, args=(args.rounds,), daemon=True)
        faults.start()
        deadline = time.monotonic() + (args.seconds or 600)
        while faults.is_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        STOP.set()
        for c in clients:
            c.stop()
            c.join(15)
        wait_for(healthy, 30)
        final = set(t for _r, _s, t in cluster_state().values())
        check(max(final) if final and None not in final else None)
        if not os.environ.get("DLOCK_HA_NO_LANGUAGES"):
            wait_for(healthy, 60)
            language_failover()
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
