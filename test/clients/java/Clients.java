// test/clients/java/Clients.java: dlock from Java, with pgjdbc (Debian's 42.5.5) at its
// defaults and HikariCP (Debian's 2.7.9). The class DLock at the end, between the two
// README marker lines, is copied into doc/languages.md; the rest checks it
// against a server. Run from the repository's top directory:
//
//   PGPORT=5432 java -cp /usr/share/java/postgresql.jar:/usr/share/java/HikariCP.jar:\
//     /usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar test/clients/java/Clients.java
//
// It reads PGHOST, PGPORT, PGUSER, PGDATABASE (and PGPASSWORD if set), prints one
// "ok - Java: ..." or "not ok - Java: ...: detail" line per check, then
// "# all Java client tests ran", and exits 1 if any check failed.

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.logging.Level;
import java.util.logging.Logger;

public class Clients {
    static final String LANG = "Java";
    static final Logger PGJDBC_LOG = Logger.getLogger("org.postgresql"); // kept: JUL holds loggers weakly
    static int failures = 0;

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static String jdbcUrl() {
        String host = env("PGHOST", "127.0.0.1");
        if (host.contains(":") && !host.startsWith("[")) host = "[" + host + "]"; // IPv6 literal
        return "jdbc:postgresql://" + host + ":" + env("PGPORT", "5432") + "/" + env("PGDATABASE", "postgres");
    }

    static Properties props() {
        Properties p = new Properties();
        p.setProperty("user", env("PGUSER", "postgres"));
        String pw = System.getenv("PGPASSWORD");
        if (pw != null) p.setProperty("password", pw);
        p.setProperty("ApplicationName", "dlock-java-client-test");
        return p;
    }

    static Connection connect() throws SQLException {
        return DriverManager.getConnection(jdbcUrl(), props());
    }

    static void ok(String what) {
        System.out.println("ok - " + LANG + ": " + what);
    }

    static void notOk(String what, String detail) {
        failures++;
        System.out.println("not ok - " + LANG + ": " + what + ": " + detail);
    }

    static void check(String what, boolean cond, String detail) {
        if (cond) ok(what);
        else notOk(what, detail);
    }

    static String describe(Throwable e) {
        String s = e.getClass().getSimpleName();
        if (e instanceof SQLException && ((SQLException) e).getSQLState() != null)
            s += " [" + ((SQLException) e).getSQLState() + "]";
        String m = e.getMessage();
        return m == null ? s : s + " " + m.replace('\n', ' ');
    }

    interface Check {
        void run() throws Exception;
    }

    /** Runs one group of checks; an unexpected exception becomes a "not ok" line. */
    static void group(String what, Check body) {
        try {
            body.run();
        } catch (Throwable e) {
            notOk(what, "unexpected exception: " + describe(e));
        }
    }

    static long countGranted(Connection c, String name) throws SQLException {
        try (PreparedStatement st = c.prepareStatement(
                "SELECT count(*) FROM dlock_locks WHERE name = ? AND granted")) {
            st.setString(1, name);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    static long ms(long startNanos) {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    static String sqlState(Throwable e) {
        return e instanceof SQLException ? ((SQLException) e).getSQLState() : null;
    }

    static HikariDataSource pool(String poolName) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl());
        config.setDataSourceProperties(props());
        config.setMaximumPoolSize(2);
        config.setPoolName(poolName);
        return new HikariDataSource(config);
    }

    /** Whether another connection can take the session lock within 5 s (and then gives it back). */
    static boolean freeSoon(Connection other, String name) throws SQLException {
        boolean got = DLock.lock(other, name, Duration.ofSeconds(5));
        if (got) DLock.unlock(other, name, false);
        return got;
    }

    interface Work {
        void run() throws Exception;
    }

    /** What run throws, or null. */
    static Throwable thrown(Work run) {
        try {
            run.run();
            return null;
        } catch (Throwable e) {
            return e;
        }
    }

    public static void main(String[] args) throws Exception {
        PGJDBC_LOG.setLevel(Level.OFF);

        final String kName = "c-" + LANG, leaseName = "lease-" + LANG, sName = "s-" + LANG,
                dName = "d-" + LANG, xName = "x-" + LANG, pName = "p-" + LANG, pdName = "pd-" + LANG,
                wName = "w-" + LANG, iName = "i-" + LANG;
        final String[] names = {kName, leaseName, sName, dName, xName, pName, pdName, wName, iName};

        try (Connection a = connect(); Connection b = connect(); Connection c = connect()) {
            // Leftovers of an earlier, interrupted run: detached locks outlive their connection.
            try (PreparedStatement st = c.prepareStatement(
                    "SELECT dlock_release(name, token) FROM dlock_locks"
                            + " WHERE name = ANY (?) AND scope = 'detached' AND granted")) {
                st.setArray(1, c.createArrayOf("text", names));
                st.executeQuery().close();
            }

            // 1. key
            group("dlockKey", () -> {
                String[] keyNames = {"nightly-report", "задача-42", "k".repeat(150) + "ключ".repeat(12) + "é".repeat(2)};
                String[] labels = {"nightly-report", "non-ASCII name", "200-character name"};
                for (int i = 0; i < keyNames.length; i++) {
                    long server;
                    try (PreparedStatement st = a.prepareStatement("SELECT dlock_key(?)")) {
                        st.setString(1, keyNames[i]);
                        try (ResultSet rs = st.executeQuery()) {
                            rs.next();
                            server = rs.getLong(1);
                        }
                    }
                    long local = DLock.dlockKey(keyNames[i]);
                    check("dlockKey equals dlock_key() for " + labels[i] + " (" + keyNames[i].length() + " chars)",
                            local == server, "dlockKey " + local + ", server " + server);
                }
            });

            // 2. contention between two connections
            group("contention", () -> {
                check("tryLock(A) takes a free lock", DLock.tryLock(a, kName, false, Duration.ofSeconds(30)), "false");
                check("tryLock(B) on a lock A holds is false", !DLock.tryLock(b, kName, false, null), "true");
                long t0 = System.nanoTime();
                boolean got = DLock.lock(b, kName, Duration.ofMillis(200));
                long took = ms(t0);
                check("lock(B, 200 ms) is false after waiting", !got && took >= 150,
                        "returned " + got + " after " + took + " ms");
                check("unlock(A) is true", DLock.unlock(a, kName, false), "false");
                check("lock(B, 5 s) takes it once A unlocked", DLock.lock(b, kName, Duration.ofSeconds(5)), "false");
                check("unlock(B) is true", DLock.unlock(b, kName, false), "false");

                // timeout null: without limit (A unlocks after 700 ms, from another thread)
                boolean aGot = DLock.tryLock(a, kName, false, null);
                Thread unlocker = new Thread(() -> {
                    try {
                        Thread.sleep(700);
                        DLock.unlock(a, kName, false);
                    } catch (Exception e) {
                        // seen below: B does not get the lock
                    }
                });
                t0 = System.nanoTime();
                unlocker.start();
                got = DLock.lock(b, kName, null);
                took = ms(t0);
                unlocker.join();
                check("lock(B, null) waits without limit: true once A unlocks after 700 ms",
                        aGot && got && took >= 600, "A took it " + aGot + "; B got " + got + " after " + took + " ms");
                if (got) DLock.unlock(b, kName, false);
            });

            // 3. lease
            group("lease", () -> {
                boolean got = DLock.tryLock(a, leaseName, false, Duration.ofSeconds(30));
                double secs = -1;
                try (PreparedStatement st = c.prepareStatement(
                        "SELECT extract(epoch FROM lease_expires - since) FROM dlock_locks WHERE name = ? AND granted")) {
                    st.setString(1, leaseName);
                    try (ResultSet rs = st.executeQuery()) {
                        if (rs.next()) secs = rs.getDouble(1);
                    }
                }
                check("tryLock with a 30 s lease: the view shows a 30 s lease", got && secs >= 29 && secs <= 31,
                        "taken " + got + ", lease_expires - since = " + secs + " s");
                check("unlock after the lease check", DLock.unlock(a, leaseName, false), "false");

                // rounded up: 99.5 ms goes out as 100 (99 would be refused: a lease is at least 100 ms)
                Throwable e = thrown(() -> {
                    if (!DLock.tryLock(a, leaseName, false, Duration.ofNanos(99_500_000)))
                        throw new IllegalStateException("tryLock returned false");
                });
                double ms = -1;
                try (PreparedStatement st = c.prepareStatement(
                        "SELECT extract(epoch FROM lease_expires - since) * 1000 FROM dlock_locks WHERE name = ? AND granted")) {
                    st.setString(1, leaseName);
                    try (ResultSet rs = st.executeQuery()) {
                        if (rs.next()) ms = rs.getDouble(1);
                    }
                }
                check("a 99.5 ms lease is rounded up to 100 ms", e == null && Math.abs(ms - 100) < 0.01,
                        (e == null ? "" : describe(e) + "; ") + "lease_expires - since = " + ms + " ms");
                if (e == null) DLock.unlock(a, leaseName, false);
            });

            // 4. shared
            group("shared", () -> {
                check("tryLock(A, shared=true) is true", DLock.tryLock(a, sName, true, null), "false");
                check("tryLock(B, shared=true) shares it", DLock.tryLock(b, sName, true, null), "false");
                check("tryLock(C, shared=false) is false while shared", !DLock.tryLock(c, sName, false, null), "true");
                check("unlock(A, shared=true) is true", DLock.unlock(a, sName, true), "false");
                check("unlock(B, shared=true) is true", DLock.unlock(b, sName, true), "false");
            });

            // 5. detached
            group("detached", () -> {
                Long token = DLock.acquire(a, dName, Duration.ofSeconds(60), Duration.ZERO);
                Object boxed = token;
                check("acquire returns a Long token > 10^13",
                        boxed instanceof Long && token > 10_000_000_000_000L,
                        "got " + token + (boxed == null ? "" : " (" + boxed.getClass().getName() + ")"));
                String viewToken = null;
                try (PreparedStatement st = c.prepareStatement(
                        "SELECT token::text FROM dlock_locks WHERE name = ? AND granted")) {
                    st.setString(1, dName);
                    try (ResultSet rs = st.executeQuery()) {
                        if (rs.next()) viewToken = rs.getString(1);
                    }
                }
                check("the token equals the view's token", token != null && token.toString().equals(viewToken),
                        "acquire " + token + ", view " + viewToken);
                Long second = DLock.acquire(b, dName, Duration.ofSeconds(1), Duration.ZERO);
                check("acquire(B, timeout 0) while held is null", second == null, "got " + second);
                long t1 = System.nanoTime();
                Long third = DLock.acquire(b, dName, Duration.ofSeconds(1), null);
                long took1 = ms(t1);
                check("acquire(B, timeout null) while held is null at once (tries once)",
                        third == null && took1 < 150, "got " + third + " after " + took1 + " ms");
                try (PreparedStatement st = b.prepareStatement("SELECT dlock_acquire(?, lease_ms => 1000)")) {
                    st.setString(1, dName);
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        long asLong = rs.getLong(1);
                        boolean wasNull = rs.wasNull();
                        Long asObject = rs.getObject(1, Long.class);
                        check("getLong reads acquire's NULL as 0; getObject(1, Long.class) as null",
                                asLong == 0 && wasNull && asObject == null,
                                "getLong " + asLong + " (wasNull " + wasNull + "), getObject " + asObject);
                    }
                }
                long t0 = System.nanoTime();
                Long waited = DLock.acquire(b, dName, Duration.ofSeconds(1), Duration.ofMillis(300));
                long took = ms(t0);
                check("acquire(B, timeout 300 ms) is null after waiting", waited == null && took >= 250,
                        "got " + waited + " after " + took + " ms");
                if (token == null) throw new IllegalStateException("no token, cannot extend or release");
                OffsetDateTime expires = DLock.extend(b, dName, token, Duration.ofSeconds(120));
                OffsetDateTime now;
                try (PreparedStatement st = c.prepareStatement("SELECT clock_timestamp()");
                     ResultSet rs = st.executeQuery()) {
                    rs.next();
                    now = rs.getObject(1, OffsetDateTime.class);
                }
                check("extend(B) returns an OffsetDateTime more than 100 s ahead",
                        expires != null && expires.isAfter(now.plusSeconds(100)),
                        "expires " + expires + ", server now " + now);
                try (PreparedStatement st = c.prepareStatement("SELECT lease_expires FROM dlock_locks WHERE name = ? AND granted")) {
                    st.setString(1, dName);
                    try (ResultSet rs = st.executeQuery()) {
                        Object plain = rs.next() ? rs.getObject(1) : null;
                        OffsetDateTime typed = rs.getObject(1, OffsetDateTime.class);
                        check("plain getObject of a timestamptz is a java.sql.Timestamp, the same instant",
                                plain instanceof Timestamp && ((Timestamp) plain).toInstant().equals(typed.toInstant()),
                                "got " + (plain == null ? null : plain.getClass().getName()) + " " + plain
                                        + ", as OffsetDateTime " + typed);
                    }
                }
                check("release(B) from another connection is true", DLock.release(b, dName, token), "false");
                check("release(B) again is false", !DLock.release(b, dName, token), "true");
            });

            // 6. transaction lock
            group("transaction lock", () -> {
                boolean[] seen = new boolean[2];
                boolean done = DLock.inTransactionLock(a, xName, Duration.ofSeconds(1), conn -> {
                    seen[0] = true;
                    seen[1] = DLock.tryLock(b, xName, false, null);
                    if (seen[1]) DLock.unlock(b, xName, false);
                });
                check("inTransactionLock ran the work and committed", done && seen[0],
                        "returned " + done + ", work ran " + seen[0]);
                check("inside it, tryLock(B) is false", seen[0] && !seen[1], "B got the lock");
                check("the connection is back in autocommit", a.getAutoCommit(), "autocommit is off");
                check("after commit, tryLock(B) is true", DLock.tryLock(b, xName, false, null), "false");
                check("unlock(B) after the transaction lock", DLock.unlock(b, xName, false), "false");

                RuntimeException boom = new RuntimeException("work failed");
                Throwable e = thrown(() -> DLock.inTransactionLock(a, xName, Duration.ofSeconds(1), conn -> {
                    throw boom;
                }));
                long left = countGranted(c, xName);
                check("inTransactionLock: work's exception propagates, the lock is gone, autocommit is back",
                        e == boom && left == 0 && a.getAutoCommit(),
                        "threw " + (e == null ? null : describe(e)) + ", granted " + left + ", autocommit " + a.getAutoCommit());

                boolean[] ran = {false};
                a.setAutoCommit(false);
                try {
                    e = thrown(() -> DLock.inTransactionLock(a, xName, Duration.ofSeconds(1), conn -> ran[0] = true));
                } finally {
                    a.rollback();
                    a.setAutoCommit(true);
                }
                check("inTransactionLock refuses a connection with autocommit off (IllegalStateException)",
                        e instanceof IllegalStateException && !ran[0],
                        "threw " + (e == null ? null : describe(e)) + ", work ran " + ran[0]);
            });

            // 7. pool
            group("pool", () -> {
                try (HikariDataSource pool = pool("dlock-java-test")) {
                    long[] during = {-1};
                    boolean done = DLock.withLock(pool, pName, Duration.ofSeconds(1),
                            conn -> during[0] = countGranted(c, pName));
                    check("withLock(pool) held the lock during work", done && during[0] == 1,
                            "returned " + done + ", granted rows during work " + during[0]);
                    long after = countGranted(c, pName);
                    check("after withLock nothing is held on pooled connections", after == 0,
                            after + " granted rows left");

                    Long token;
                    try (Connection conn = pool.getConnection()) {
                        token = DLock.acquire(conn, pdName, Duration.ofSeconds(30), Duration.ZERO);
                    }
                    boolean released = false;
                    if (token != null) {
                        try (Connection conn = pool.getConnection()) {
                            released = DLock.release(conn, pdName, token);
                        }
                    }
                    check("acquire and release through the pool", token != null && released,
                            "token " + token + ", released " + released);

                    // work that fails: its own exception, and nothing held afterwards
                    RuntimeException boom = new RuntimeException("work failed");
                    Throwable e = thrown(() -> DLock.withLock(pool, pName, Duration.ofSeconds(1), conn -> {
                        throw boom;
                    }));
                    long left = countGranted(c, pName);
                    check("withLock: work's exception propagates and nothing is held", e == boom && left == 0,
                            "threw " + (e == null ? null : describe(e)) + ", granted " + left);

                    e = thrown(() -> DLock.withLock(pool, pName, Duration.ofSeconds(1), conn -> {
                        conn.setAutoCommit(false);
                        try (Statement st = conn.createStatement()) {
                            st.executeQuery("SELECT 1/0");
                        }
                    }));
                    left = countGranted(c, pName);
                    check("withLock: work failing in a transaction: its 22012 propagates (not 25P02), nothing is held",
                            "22012".equals(sqlState(e)) && left == 0,
                            "threw " + (e == null ? null : describe(e)) + ", granted " + left);

                    // a transaction begun in SQL, unseen by getAutoCommit: the unlock fails, the pool evicts
                    e = thrown(() -> DLock.withLock(pool, pName, Duration.ofSeconds(1), conn -> {
                        try (Statement st = conn.createStatement()) {
                            st.execute("BEGIN");
                            st.executeQuery("SELECT 1/0");
                        }
                    }));
                    String suppressed = e == null || e.getSuppressed().length == 0 ? null : sqlState(e.getSuppressed()[0]);
                    boolean free = freeSoon(c, pName);
                    check("withLock: unlock failing (25P02): work's 22012 propagates, 25P02 suppressed, connection evicted, lock gone",
                            "22012".equals(sqlState(e)) && "25P02".equals(suppressed) && free,
                            "threw " + (e == null ? null : describe(e)) + ", suppressed " + suppressed
                                    + ", another connection took it within 5 s: " + free);

                    e = thrown(() -> DLock.withLock(pool, pName, Duration.ofSeconds(1), conn -> {
                        try (Statement st = conn.createStatement()) {
                            st.execute("BEGIN");
                            try {
                                st.executeQuery("SELECT 1/0");
                            } catch (SQLException ignored) {
                                // the transaction is left failed
                            }
                        }
                    }));
                    free = freeSoon(c, pName);
                    check("withLock: work returning with a failed transaction begun in SQL: 25P02, lock gone",
                            "25P02".equals(sqlState(e)) && free,
                            "threw " + (e == null ? null : describe(e)) + ", another connection took it within 5 s: " + free);

                    done = DLock.withLock(pool, pName, Duration.ofSeconds(1),
                            conn -> during[0] = countGranted(c, pName));
                    check("withLock works again after the evictions", done && during[0] == 1 && countGranted(c, pName) == 0,
                            "returned " + done + ", granted rows during work " + during[0]);
                }
            });

            // 7b. the wrong way with a pool: a session lock unlocked on another pooled connection
            group("pool, the wrong way", () -> {
                boolean took, unlockedElsewhere;
                long held, heldInPool;
                try (HikariDataSource pool = pool("dlock-java-wrong")) {
                    try (Connection first = pool.getConnection()) {
                        took = DLock.tryLock(first, wName, false, null);
                        try (Connection second = pool.getConnection()) {
                            unlockedElsewhere = DLock.unlock(second, wName, false);
                        }
                        held = countGranted(c, wName);
                    }
                    heldInPool = countGranted(c, wName);
                }
                check("unlock on another pooled connection is false and the lock stays held",
                        took && !unlockedElsewhere && held == 1,
                        "took " + took + ", unlock " + unlockedElsewhere + ", granted " + held);
                check("the lock stays held by its connection back in the pool", heldInPool == 1,
                        "granted " + heldInPool);
                long left = -1;
                for (int i = 0; i < 50 && left != 0; i++) {
                    if (i > 0) Thread.sleep(100);
                    left = countGranted(c, wName);
                }
                check("closing the pool ends it", left == 0, "granted " + left + " 5 s after closing the pool");
            });

            // 7c. pgjdbc's ways, as the README says
            group("pgjdbc", () -> {
                try (Connection d = connect()) {
                    check("a new connection is in autocommit", d.getAutoCommit(), "autocommit is off");
                }
                Throwable e = thrown(() -> {
                    try (PreparedStatement st = b.prepareStatement("SELECT dlock_lock(?, timeout => ?)")) {
                        st.setString(1, iName);
                        st.setString(2, "5 s");
                        st.executeQuery().close();
                    }
                });
                check("setString for an interval argument (timeout => ?) is 42883",
                        "42883".equals(sqlState(e)) && e.getMessage().contains("dlock_lock(character varying, timeout => character varying) does not exist"),
                        e == null ? "no error" : describe(e));
                e = thrown(() -> {
                    try (PreparedStatement st = b.prepareStatement("SELECT dlock_lock(?, timeout => ?)")) {
                        st.setString(1, iName);
                        st.setObject(2, Duration.ofSeconds(5));
                        st.executeQuery().close();
                    }
                });
                check("setObject with a Duration is 07006 (Can't infer the SQL type ... java.time.Duration)",
                        "07006".equals(sqlState(e)) && e.getMessage().contains("Can't infer the SQL type to use for an instance of java.time.Duration"),
                        e == null ? "no error" : describe(e));
                Object cast = null;
                try (PreparedStatement st = b.prepareStatement("SELECT dlock_lock(?, timeout => ?::interval)")) {
                    st.setString(1, iName);
                    st.setString(2, "5 s");
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        cast = rs.getObject(1);
                    }
                }
                check("timeout => ?::interval with setString works; getObject of a boolean is a Boolean",
                        Boolean.TRUE.equals(cast), "got " + cast + (cast == null ? "" : " (" + cast.getClass().getName() + ")"));
                DLock.unlock(b, iName, false);

                boolean xact;
                try (PreparedStatement st = b.prepareStatement("SELECT dlock_try_xact(?)")) {
                    st.setString(1, iName);
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        xact = rs.getBoolean(1);
                    }
                }
                long left = countGranted(c, iName);
                check("in autocommit a transaction lock ends with its own statement", xact && left == 0,
                        "dlock_try_xact " + xact + ", granted after it " + left);

                try (PreparedStatement st = b.prepareStatement("SELECT dlock_unlock(?)")) {
                    st.setString(1, iName);
                    boolean unlocked;
                    try (ResultSet rs = st.executeQuery()) {
                        rs.next();
                        unlocked = rs.getBoolean(1);
                    }
                    SQLWarning w = st.getWarnings();
                    check("unlock of a lock not held: false, and the WARNING is in Statement.getWarnings()",
                            !unlocked && w != null && w.getMessage().contains("you don't own a lock"),
                            "unlock " + unlocked + ", warning " + (w == null ? null : w.getMessage()));
                }
            });

            // a session ended over its lease, used again
            group("lost lease", () -> {
                String n = "lost-Java";
                try (Connection lost = connect()) {
                    try (PreparedStatement st = lost.prepareStatement("SELECT dlock_try_ms(?, false, 200)")) {
                        st.setString(1, n);
                        st.executeQuery().close();
                    }
                    for (int i = 0; i < 200; i++) {
                        try (PreparedStatement st = c.prepareStatement(
                                "SELECT count(*) FROM dlock_locks WHERE name = ? AND granted")) {
                            st.setString(1, n);
                            try (ResultSet rs = st.executeQuery()) {
                                rs.next();
                                if (rs.getInt(1) == 0)
                                    break;
                            }
                        }
                        Thread.sleep(50);
                    }
                    SQLException seen = null;
                    try (Statement st = lost.createStatement()) {
                        st.executeQuery("SELECT 1").close();
                    } catch (SQLException e) {
                        seen = e;
                    }
                    String said = seen == null ? "no error" : seen.getSQLState() + " " + seen.getMessage();
                    System.out.println("#   java: " + said.replace("\n", " | "));
                    check("a session ended over its lease, used again: pgjdbc throws a PSQLException with the "
                            + "server's FATAL: SQLState 57L01, the lease of lock ... ran out",
                            seen != null && "57L01".equals(seen.getSQLState())
                                    && seen.getMessage().contains("the lease of lock \"" + n + "\" ran out"),
                            said);
                }
            });

            // 8. nothing left
            group("nothing left", () -> {
                List<String> left = new ArrayList<>();
                try (PreparedStatement st = c.prepareStatement(
                        "SELECT name, scope, granted FROM dlock_locks WHERE name = ANY (?)")) {
                    st.setArray(1, c.createArrayOf("text", names));
                    try (ResultSet rs = st.executeQuery()) {
                        while (rs.next())
                            left.add(rs.getString(1) + "/" + rs.getString(2) + (rs.getBoolean(3) ? "" : "(waiting)"));
                    }
                }
                check("no lock of these tests is left in dlock_locks", left.isEmpty(), "left: " + left);
            });
        } catch (Throwable e) {
            notOk("connection", "unexpected exception: " + describe(e));
        }

        System.out.println("# all " + LANG + " client tests ran");
        System.exit(failures == 0 ? 0 : 1);
    }
}

// README begin
// dlock from Java with pgjdbc and HikariCP. Uses com.zaxxer.hikari.HikariDataSource,
// java.nio.{ByteBuffer, ByteOrder}, java.nio.charset.StandardCharsets, java.security.*,
// java.sql.* and java.time.{Duration, OffsetDateTime}.
final class DLock {
    private DLock() {}

    /** Work to run while a lock is held, on the connection that holds it. */
    @FunctionalInterface
    interface SqlWork {
        void run(Connection conn) throws SQLException;
    }

    /** The key of a name, as SELECT dlock_key(name): SHA-256 of its UTF-8, first 8 bytes little-endian. */
    static long dlockKey(String name) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(name.getBytes(StandardCharsets.UTF_8));
            return ByteBuffer.wrap(hash, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e); // every Java platform has SHA-256
        }
    }

    /** Takes a session lock if it is free now; lease null: no lease. */
    static boolean tryLock(Connection conn, String name, boolean shared, Duration lease) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_try_ms(?, ?, ?)")) {
            st.setString(1, name);
            st.setBoolean(2, shared);
            setMillis(st, 3, lease);
            return queryBoolean(st);
        }
    }

    /** Waits up to timeout for a session lock, null: without limit; false at the deadline. */
    static boolean lock(Connection conn, String name, Duration timeout) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_lock_ms(?, ?, false, NULL)")) {
            st.setString(1, name);
            setMillis(st, 2, timeout);
            return queryBoolean(st);
        }
    }

    /** Releases a session lock of this connection; false (and a server WARNING) if it holds none. */
    static boolean unlock(Connection conn, String name, boolean shared) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_unlock(?, ?)")) {
            st.setString(1, name);
            st.setBoolean(2, shared);
            return queryBoolean(st);
        }
    }

    /**
     * A detached lock: its fencing token, or null if not acquired within timeout, the time to
     * wait: ZERO or null tries once (unlike lock, where null waits without limit).
     */
    static Long acquire(Connection conn, String name, Duration lease, Duration timeout) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement(
                "SELECT dlock_acquire_ms(?, ?, ?, false)")) {
            st.setString(1, name);
            setMillis(st, 2, lease);
            setMillis(st, 3, timeout);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getObject(1, Long.class);
            }
        }
    }

    /** Extends a detached lock to now + lease, from any connection; returns the new expiry. */
    static OffsetDateTime extend(Connection conn, String name, long token, Duration lease) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_extend_ms(?, ?, ?)")) {
            st.setString(1, name);
            st.setLong(2, token);
            setMillis(st, 3, lease);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getObject(1, OffsetDateTime.class);
            }
        }
    }

    /** Releases a detached lock, from any connection; false (and a WARNING) if not held with that token. */
    static boolean release(Connection conn, String name, long token) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_release(?, ?)")) {
            st.setString(1, name);
            st.setLong(2, token);
            return queryBoolean(st);
        }
    }

    /**
     * Runs work in one transaction that holds the lock (timeout as in lock), released by its
     * commit or rollback; false, without running work, if the lock is not granted in time.
     */
    static boolean inTransactionLock(Connection conn, String name, Duration timeout, SqlWork work)
            throws SQLException {
        if (!conn.getAutoCommit()) {
            throw new IllegalStateException("inTransactionLock: autocommit is off, so the connection may have"
                    + " a transaction of its own, which this would commit or roll back");
        }
        conn.setAutoCommit(false);
        try (PreparedStatement st = conn.prepareStatement("SELECT dlock_lock_xact_ms(?, ?, false, NULL)")) {
            st.setString(1, name);
            setMillis(st, 2, timeout);
            if (!queryBoolean(st)) {
                conn.rollback();
                return false;
            }
            work.run(conn);
            conn.commit();
            return true;
        } catch (Throwable e) {
            try {
                conn.rollback();
            } catch (SQLException r) {
                e.addSuppressed(r);
            }
            throw e;
        } finally {
            conn.setAutoCommit(true);
        }
    }

    /**
     * Runs work under a session lock (timeout as in lock) on one connection of the pool: lock,
     * work and unlock on that connection, then it goes back. A transaction work leaves open is
     * rolled back; if the unlock then fails, the pool evicts and closes the connection, which
     * ends its locks. An exception of work is the one thrown, with later ones suppressed.
     */
    static boolean withLock(HikariDataSource pool, String name, Duration timeout, SqlWork work)
            throws SQLException {
        try (Connection conn = pool.getConnection()) {
            if (!lock(conn, name, timeout)) {
                return false;
            }
            try {
                work.run(conn);
            } catch (Throwable e) {
                unlockOrEvict(pool, conn, name, e);
                throw e;
            }
            unlockOrEvict(pool, conn, name, null);
            return true;
        }
    }

    // Errors go to failure, if there is one; else the unlock's is thrown.
    private static void unlockOrEvict(HikariDataSource pool, Connection conn, String name, Throwable failure)
            throws SQLException {
        boolean unlocked = false;
        try {
            if (!conn.getAutoCommit()) {
                conn.rollback(); // in a failed transaction the unlock would fail (25P02)
            }
        } catch (SQLException e) {
            if (failure != null) failure.addSuppressed(e);
        }
        try {
            unlocked = unlock(conn, name, false);
        } catch (SQLException e) {
            if (failure == null) throw e;
            failure.addSuppressed(e);
        } finally {
            if (!unlocked) {
                pool.evictConnection(conn);
            }
        }
    }

    // In milliseconds rounded up, as dlock rounds an interval: toMillis() alone would make
    // 0.5 ms 0, which means "do not wait".
    private static void setMillis(PreparedStatement st, int index, Duration d) throws SQLException {
        if (d == null) {
            st.setNull(index, Types.BIGINT);
        } else {
            st.setLong(index, d.plusNanos(999_999).toMillis());
        }
    }

    private static boolean queryBoolean(PreparedStatement st) throws SQLException {
        try (ResultSet rs = st.executeQuery()) {
            rs.next();
            return rs.getBoolean(1);
        }
    }
}
// README end
