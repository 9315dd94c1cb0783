<?php
// failover.php: what a PDO pgsql client sees when the primary that holds its dlock lock
// goes away (a switchover or failover), and how it gets the lock back on the new primary.
// Run by test/clients/run --failover (test/ha.py drives it):
//
//   DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go php test/clients/php/failover.php
//
// Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (what the
// next call on the old connection threw), then "retaken T2 P2 SECONDS" and
// "# all php failover tests ran"; "not ok - php failover: ..." and exit 1 otherwise.

declare(strict_types=1);

const NAME = 'ha-php';

function fail(string $why): never
{
    echo "not ok - php failover: $why\n";
    exit(1);
}

/**
 * PDO pgsql hands the DSN to libpq, which takes every host of the cluster and, with
 * target_session_attrs=read-write, keeps the first that accepts writes. PDO::ATTR_TIMEOUT
 * is libpq's connect_timeout (PDO's default is 30 s).
 */
function connectPrimary(): PDO
{
    $hosts = $ports = [];
    foreach (explode(',', getenv('DLOCK_FAILOVER_HOSTS')) as $hostPort) {
        $i = strrpos($hostPort, ':');
        $hosts[] = substr($hostPort, 0, $i);
        $ports[] = substr($hostPort, $i + 1);
    }
    $dsn = sprintf('pgsql:host=%s;port=%s;dbname=postgres;target_session_attrs=read-write',
        implode(',', $hosts), implode(',', $ports));
    return new PDO($dsn, 'postgres', null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5]);
}

function one(PDO $conn, string $sql, array $params = [NAME]): mixed
{
    $st = $conn->prepare($sql);
    $st->execute($params);
    return $st->fetchColumn();
}

/** Takes the lock with a 60 s lease; returns its token and the server's port. */
function lockAndToken(PDO $conn): array
{
    if (one($conn, "SELECT dlock_try(?, lease => '60 s')") !== true) {
        fail('dlock_try on the primary was not true');
    }
    return [one($conn, 'SELECT dlock_token(?)'), one($conn, 'SELECT inet_server_port()', [])];
}

try {
    $conn = connectPrimary();
    [$token, $port] = lockAndToken($conn);
    echo "held $token $port\n";
    flush();

    $go = getenv('DLOCK_FAILOVER_GO');
    for ($waited = 0; !file_exists($go); $waited += 100) {
        if ($waited >= 120000) {
            fail("no $go within 120 s");
        }
        usleep(100000);
        clearstatcache();
    }

    // The old connection: its server ended the session, and the lock with it.
    try {
        $token = one($conn, 'SELECT dlock_token(?)');
        echo 'lost none ', var_export($token, true), "\n";
    } catch (PDOException $e) {
        echo 'lost ', get_class($e), ' ', $e->getCode() ?: 'no SQLSTATE', ' ', strtok($e->getMessage(), "\n"), "\n";
    }
    $conn = null;

    // Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
    $start = microtime(true);
    for (;;) {
        try {
            $conn = connectPrimary();
            [$token, $port] = lockAndToken($conn);
            break;
        } catch (PDOException $e) {
            $conn = null;
            if (microtime(true) - $start > 60) {
                fail('no primary within 60 s: ' . $e->getMessage());
            }
            usleep(200000); // no primary yet
        }
    }
    printf("retaken %s %s %.1F\n", $token, $port, microtime(true) - $start);
    one($conn, 'SELECT dlock_unlock(?)');
    $conn = null;
    echo "# all php failover tests ran\n";
} catch (Throwable $e) {
    fail('unexpected ' . get_class($e) . ': ' . $e->getMessage());
}
