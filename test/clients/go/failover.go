//go:build ignore

// failover.go: what a pgx v4 client sees when the primary that holds its dlock lock goes
// away (a switchover or failover), and how it gets the lock back on the new primary.
// Run by test/clients/run --failover (test/ha.py drives it); the build tag keeps it out of
// the package of clients.go, and "go run failover.go" builds this file alone:
//
//	cd test/clients/go && DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go \
//	  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE=/var/tmp/dlock-clients/gocache GOFLAGS= go run failover.go
//
// Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (what the
// next call on the old connection returned), then "retaken T2 P2 SECONDS" and
// "# all go failover tests ran"; "not ok - go failover: ..." and exit 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

const name = "ha-go"

func fail(format string, args ...interface{}) {
	fmt.Printf("not ok - go failover: "+format+"\n", args...)
	os.Exit(1)
}

// connectPrimary: pgx v4 takes every host in one URL and, with target_session_attrs,
// keeps the first one that accepts writes, as libpq does.
func connectPrimary(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, "postgres://postgres@"+os.Getenv("DLOCK_FAILOVER_HOSTS")+
		"/postgres?target_session_attrs=read-write&connect_timeout=5")
}

// lockAndToken takes the lock with a 60 s lease and returns its token and the server's port.
func lockAndToken(ctx context.Context, conn *pgx.Conn) (token int64, port int, err error) {
	var ok bool
	if err = conn.QueryRow(ctx, "SELECT dlock_try($1, lease => '60 s')", name).Scan(&ok); err != nil {
		return
	}
	if !ok {
		fail("dlock_try on the primary was not true")
	}
	err = conn.QueryRow(ctx, "SELECT dlock_token($1), inet_server_port()", name).Scan(&token, &port)
	return
}

func main() {
	ctx := context.Background()
	conn, err := connectPrimary(ctx)
	if err != nil {
		fail("connect: %v", err)
	}
	t1, p1, err := lockAndToken(ctx, conn)
	if err != nil {
		fail("taking the lock: %v", err)
	}
	fmt.Println("held", t1, p1)

	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(os.Getenv("DLOCK_FAILOVER_GO")); err == nil {
			break
		}
		if time.Since(start) > 120*time.Second {
			fail("no %s within 120 s", os.Getenv("DLOCK_FAILOVER_GO"))
		}
	}

	// The old connection: its server ended the session, and the lock with it.
	var token *int64
	if err := conn.QueryRow(ctx, "SELECT dlock_token($1)", name).Scan(&token); err != nil {
		code := "no SQLSTATE"
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			code = pgErr.Code
		}
		fmt.Printf("lost %T %s %s\n", err, code, strings.SplitN(err.Error(), "\n", 2)[0])
	} else if token == nil {
		fmt.Println("lost none NULL")
	} else {
		fmt.Println("lost none", *token)
	}
	conn.Close(ctx)

	// Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
	start := time.Now()
	for {
		conn, err = connectPrimary(ctx)
		if err == nil {
			var t2 int64
			var p2 int
			if t2, p2, err = lockAndToken(ctx, conn); err == nil {
				fmt.Printf("retaken %d %d %.1f\n", t2, p2, time.Since(start).Seconds())
				if _, err := conn.Exec(ctx, "SELECT dlock_unlock($1)", name); err != nil {
					fail("dlock_unlock: %v", err)
				}
				conn.Close(ctx)
				fmt.Println("# all go failover tests ran")
				return
			}
			conn.Close(ctx)
		}
		if time.Since(start) > 60*time.Second {
			fail("no primary within 60 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // no primary yet
	}
}
