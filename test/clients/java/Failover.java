// test/clients/java/Failover.java: what a pgjdbc client sees when the primary that holds its
// dlock lock goes away (a switchover or failover), and how it gets the lock back on the new
// primary. Run by test/clients/run --failover (test/ha.py drives it):
//
//   DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go \
//     java -cp /usr/share/java/postgresql.jar test/clients/java/Failover.java
//
// Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (what the
// next call on the old connection threw), then "retaken T2 P2 SECONDS" and
// "# all java failover tests ran"; "not ok - java failover: ..." and exit 1 otherwise.

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Locale;

public class Failover {
    static final String NAME = "ha-java";

    // pgjdbc takes every host of the cluster and finds the primary itself.
    static Connection connectPrimary(String hosts) throws SQLException {
        return DriverManager.getConnection("jdbc:postgresql://" + hosts
                + "/postgres?targetServerType=primary&connectTimeout=5", "postgres", "");
    }

    static String one(Connection conn, String sql) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement(sql)) {
            st.setString(1, NAME);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    static String port(Connection conn) throws SQLException {
        try (ResultSet rs = conn.createStatement().executeQuery("SELECT inet_server_port()")) {
            rs.next();
            return rs.getString(1);
        }
    }

    static void fail(String why) {
        System.out.println("not ok - java failover: " + why);
        System.exit(1);
    }

    public static void main(String[] args) {
        try {
            run();
        } catch (Exception e) {
            fail("unexpected " + e);
        }
    }

    static void run() throws Exception {
        String hosts = System.getenv("DLOCK_FAILOVER_HOSTS");
        Path go = Path.of(System.getenv("DLOCK_FAILOVER_GO"));

        Connection conn = connectPrimary(hosts);
        if (!"t".equals(one(conn, "SELECT dlock_try(?, lease => '60 s')")))
            fail("dlock_try on the primary was not true");
        System.out.println("held " + one(conn, "SELECT dlock_token(?)") + " " + port(conn));
        System.out.flush();

        for (long waited = 0; !Files.exists(go); waited += 100) {
            if (waited >= 120_000)
                fail("no " + go + " within 120 s");
            Thread.sleep(100);
        }

        // The old connection: its server ended the session, and the lock with it.
        try {
            System.out.println("lost none " + one(conn, "SELECT dlock_token(?)"));
        } catch (SQLException e) {
            System.out.println("lost " + e.getClass().getName() + " "
                    + (e.getSQLState() == null ? "no SQLSTATE" : e.getSQLState()) + " "
                    + e.getMessage().split("\n", 2)[0]);
        }
        System.out.flush();
        conn.close();

        // Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
        long start = System.nanoTime();
        Connection again = null;
        SQLException last = null;
        while (again == null && System.nanoTime() - start < 60_000_000_000L) {
            try {
                again = connectPrimary(hosts);
                if (!"t".equals(one(again, "SELECT dlock_try(?, lease => '60 s')")))
                    fail("dlock_try on the new primary was not true");
            } catch (SQLException e) {
                last = e; // no primary yet
                if (again != null)
                    again.close();
                again = null;
                Thread.sleep(200);
            }
        }
        if (again == null)
            fail("no primary within 60 s: " + last);
        double took = (System.nanoTime() - start) / 1e9;
        System.out.printf(Locale.ROOT, "retaken %s %s %.1f%n", one(again, "SELECT dlock_token(?)"), port(again), took);
        one(again, "SELECT dlock_unlock(?)");
        again.close();
        System.out.println("# all java failover tests ran");
    }
}
