/*
 * test/bench/wakeup.c: wake-up latency, from a release to the grant of the
 * one waiting for it.  test/bench/run builds and runs it, as it does
 * cycles.c.
 *
 *   wakeup KIND REPS TARGET
 *
 * KIND is one of
 *   lock       a holder takes the name with dlock_try($1); a waiter, on its
 *              own connection, waits in dlock_lock($1, timeout => '10s');
 *              the holder releases with dlock_unlock($1)
 *   semaphore  the name is a semaphore of 2 permits: one permit is held by a
 *              third connection all along, the holder takes the other with
 *              dlock_try($1, permits => 2), the waiter waits in
 *              dlock_lock($1, timeout => '10s', permits => 2), the holder
 *              releases with dlock_unlock($1)
 *   detached   (1.6) the holder takes the name with dlock_try($1); the waiter
 *              waits in dlock_acquire($1, '30s', timeout => '10s'), first
 *              in line (its waiter process queued for the name); the holder
 *              releases with dlock_unlock($1); the waiter gives the lock
 *              back with dlock_release($1, token)
 *   detached-second  the same, with the waiter second in line: a first one
 *              (a connection and thread of its own) waits before it and
 *              releases what it gets at once, so the waiter's grant comes
 *              after the line passed to it and its own waiter process
 *              started (doc/detached.md: callers line up)
 *   follower-notify  (1.7) a leader change seen by a follower: the holder
 *              takes the name with dlock_try($1); a candidate waits in
 *              dlock_lock($1, timeout => '10s', notify => true); a follower,
 *              on a third connection, LISTENs on the channel dlock; the
 *              latency runs from the release to when the follower has the
 *              candidate's "granted" event (a NOTIFY sent by dlock's
 *              notifier process); the candidate keeps the lock until then
 *   follower-poll  the same, the candidate without notify, the follower
 *              reading dlock_locks every 100 ms (SELECT pid ... WHERE name
 *              = $1 AND granted) until it shows the candidate
 *   redis      the holder takes the key with SET key token NX PX 30000; the
 *              waiter polls the same SET every 10 ms (sleeping 10 ms after
 *              each refusal), as Redis lock clients do; the holder releases
 *              with DEL key
 * TARGET is a libpq connection string for lock and semaphore and the path
 * of Redis's Unix socket for redis.
 *
 * The releasing side (the main thread) reads CLOCK_MONOTONIC right before it
 * sends the release; the waiting side (a thread of its own, with its own
 * connection) reads it right when its acquire returns granted.  Latency =
 * the difference.  The release is sent only once the waiter waits: for
 * lock and semaphore once pg_stat_activity (read on a fourth connection)
 * shows the waiter's backend in the wait (wait_event_type Lock: in the lock
 * manager's queue; Extension: a semaphore's first in line, asleep on its
 * condition variable); for redis 10 to 20 ms (uniformly at random, so that
 * the release falls anywhere in the 10 ms poll) after the waiter's first
 * refused SET.  Between two repetitions the waiter gives back what it got.
 *
 * Three unrecorded warm-up repetitions come first.  It prints one line per
 * repetition, "sample MS" (milliseconds, 4 decimals), then
 *   KIND reps=N median_ms=M p99_ms=P min_ms=A max_ms=B
 * Anything unexpected (an acquire not granted, a release of nothing, a
 * grant before the release) is an error: it says which and exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/select.h>

#include <libpq-fe.h>
#ifdef WITH_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define WARMUP 3
#define POLL_MS 10				/* redis: the waiter's poll */
#define LEASE_MS 30000			/* redis: PX of every SET */
#define WAIT_LIMIT_S 10			/* no wait here should take this long */

typedef enum
{
	K_LOCK,
	K_SEMAPHORE,
	K_REDIS,
	K_DETACHED,
	K_DETACHED_SECOND,
	K_FOLLOWER_NOTIFY,
	K_FOLLOWER_POLL
} Kind;

#define NKINDS 7
static const char *const kind_names[] = {"lock", "semaphore", "redis", "detached", "detached-second",
"follower-notify", "follower-poll"};
#define FOLLOWER_POLL_MS 100


static Kind kind;
static bool
follower_kind(void)
{
	return kind == K_FOLLOWER_NOTIFY || kind == K_FOLLOWER_POLL;
}
static const char *target;
static const char *name;		/* the lock's name or Redis key */

/* main thread <-> waiter thread */
static pthread_barrier_t go;
static pthread_barrier_t done;
static atomic_bool quit;
#ifdef WITH_HIREDIS
static atomic_int refusals;		/* redis: SETs refused this repetition */
#endif
static struct timespec granted; /* the waiter: when its acquire returned */

static void
fail(const char *fmt,...)
{
	va_list		ap;

	fflush(stdout);
	fprintf(stderr, "wakeup: %s: ", kind_names[kind]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double
ms_between(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) * 1e3 + (b->tv_nsec - a->tv_nsec) / 1e6;
}

static void
sleep_ms(double ms)
{
	struct timespec t;

	t.tv_sec = (time_t) (ms / 1e3);
	t.tv_nsec = (long) ((ms - t.tv_sec * 1e3) * 1e6);
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

/* ---- PostgreSQL ---- */

static PGconn *
pg_connect(const char *who)
{
	PGconn	   *conn = PQconnectdb(target);

	if (PQstatus(conn) != CONNECTION_OK)
		fail("%s cannot connect: %s", who, PQerrorMessage(conn));
	return conn;
}

static void
pg_prepare(PGconn *conn, const char *stmt, const char *sql, int nparams)
{
	PGresult   *res = PQprepare(conn, stmt, sql, nparams, NULL);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail("cannot prepare %s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
}

/* run a prepared one-value statement; its value (NULL for SQL NULL) copied */
static char *
pg_value(PGconn *conn, const char *stmt, int nparams, const char *const *params,
		 char *buf, size_t len)
{
	PGresult   *res = PQexecPrepared(conn, stmt, nparams, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fail("%s failed: %s", stmt, PQresultErrorMessage(res));
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
		fail("%s returned %d rows of %d columns, expected one value",
			 stmt, PQntuples(res), PQnfields(res));
	if (PQgetisnull(res, 0, 0))
	{
		PQclear(res);
		return NULL;
	}
	snprintf(buf, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return buf;
}

static void
pg_true(PGconn *conn, const char *stmt, const char *what)
{
	const char *params[1] = {name};
	char		buf[64];
	const char *v = pg_value(conn, stmt, 1, params, buf, sizeof(buf));

	if (v == NULL || strcmp(v, "t") != 0)
		fail("%s returned %s, expected true", what, v ? v : "NULL");
}

/* the holder's and the waiter's statements */
static void
pg_prepare_lock(PGconn *conn)
{
	if (kind == K_LOCK || kind == K_FOLLOWER_POLL)
	{
		pg_prepare(conn, "try", "SELECT dlock_try($1)", 1);
		pg_prepare(conn, "wait", "SELECT dlock_lock($1, timeout => '10s')", 1);
	}
	else if (kind == K_FOLLOWER_NOTIFY)
	{
		pg_prepare(conn, "try", "SELECT dlock_try($1)", 1);
		pg_prepare(conn, "wait", "SELECT dlock_lock($1, timeout => '10s', notify => true)", 1);
	}
	else if (kind == K_DETACHED || kind == K_DETACHED_SECOND)
	{
		pg_prepare(conn, "try", "SELECT dlock_try($1)", 1);
		pg_prepare(conn, "wait", "SELECT dlock_acquire($1, '30s', timeout => '10s')", 1);
		pg_prepare(conn, "release", "SELECT dlock_release($1, $2::bigint)", 2);
	}
	else
	{
		pg_prepare(conn, "try", "SELECT dlock_try($1, permits => 2)", 1);
		pg_prepare(conn, "wait", "SELECT dlock_lock($1, timeout => '10s', permits => 2)", 1);
	}
	pg_prepare(conn, "unlock", "SELECT dlock_unlock($1)", 1);
}

/* a detached acquisition waited for, and its release; granted: when it returned */
static void
pg_detached_cycle(PGconn *conn, struct timespec *when)
{
	const char *params[2] = {name, NULL};
	char		token[64];

	if (pg_value(conn, "wait", 1, params, token, sizeof(token)) == NULL)
		fail("a waited dlock_acquire returned NULL");
	if (when != NULL)
		clock_gettime(CLOCK_MONOTONIC, when);
	params[1] = token;
	if (pg_value(conn, "release", 2, params, token, sizeof(token)) == NULL ||
		strcmp(token, "t") != 0)
		fail("dlock_release of the waited lock did not release it");
}

/* follower kinds: the follower has seen this many grants of the candidate */
static atomic_int seen;
static atomic_bool saw_other;	/* follower-poll: it read the name not held by the candidate */
static char candidate_pid[16];

static void *
pg_waiter(void *arg)
{
	PGconn	   *conn = arg;

	for (;;)
	{
		int			before = atomic_load(&seen);

		pthread_barrier_wait(&go);
		if (atomic_load(&quit))
			break;
		if (kind == K_DETACHED || kind == K_DETACHED_SECOND)
			pg_detached_cycle(conn, &granted);
		else
		{
			struct timespec start,
						now;

			pg_true(conn, "wait", "the waiter's dlock_lock");
			if (!follower_kind())
				clock_gettime(CLOCK_MONOTONIC, &granted);
			/* a follower's kind: the lock is kept until the follower saw it */
			clock_gettime(CLOCK_MONOTONIC, &start);
			while (follower_kind() && atomic_load(&seen) == before)
			{
				clock_gettime(CLOCK_MONOTONIC, &now);
				if (ms_between(&start, &now) > WAIT_LIMIT_S * 1e3)
					fail("the follower did not see the candidate's grant");
				sleep_ms(0.2);
			}
			pg_true(conn, "unlock", "the waiter's dlock_unlock");
		}
		pthread_barrier_wait(&done);
	}
	return NULL;
}

/*
 * The follower: sees each grant of the candidate (its backend's pid
 * candidate_pid), by a NOTIFY on the channel dlock or by reading
 * dlock_locks every 100 ms, and notes when (granted).
 */
static void *
pg_follower(void *arg)
{
	PGconn	   *conn = arg;
	bool		was_candidate = false;

	while (!atomic_load(&quit))
	{
		if (kind == K_FOLLOWER_NOTIFY)
		{
			fd_set		fds;
			struct timeval tv = {0, 10000};
			int			sock = PQsocket(conn);
			PGnotify   *n;

			FD_ZERO(&fds);
			FD_SET(sock, &fds);
			if (select(sock + 1, &fds, NULL, NULL, &tv) < 0 && errno != EINTR)
				fail("select: %s", strerror(errno));
			if (!PQconsumeInput(conn))
				fail("the follower's connection: %s", PQerrorMessage(conn));
			while ((n = PQnotifies(conn)) != NULL)
			{
				char		want[64];

				snprintf(want, sizeof(want), "\"pid\": %s,", candidate_pid);
				if (strstr(n->extra, "\"event\": \"granted\"") != NULL &&
					strstr(n->extra, want) != NULL)
				{
					clock_gettime(CLOCK_MONOTONIC, &granted);
					atomic_fetch_add(&seen, 1);
				}
				PQfreemem(n);
			}
		}
		else
		{
			const char *params[1] = {name};
			char		buf[64];
			const char *v = pg_value(conn, "holder", 1, params, buf, sizeof(buf));
			bool		is_candidate = v != NULL && strcmp(v, candidate_pid) == 0;

			if (is_candidate && !was_candidate)
			{
				clock_gettime(CLOCK_MONOTONIC, &granted);
				atomic_fetch_add(&seen, 1);
			}
			was_candidate = is_candidate;
			if (!is_candidate)
				atomic_store(&saw_other, true);
			sleep_ms(FOLLOWER_POLL_MS);
		}
	}
	return NULL;
}

/* detached-second: the first in line, which lets go of what it gets at once */
static pthread_barrier_t first_go;
static pthread_barrier_t first_done;

static void *
pg_first(void *arg)
{
	PGconn	   *conn = arg;

	for (;;)
	{
		pthread_barrier_wait(&first_go);
		if (atomic_load(&quit))
			break;
		pg_detached_cycle(conn, NULL);
		pthread_barrier_wait(&first_done);
	}
	return NULL;
}

/* until pg_stat_activity shows backend pid waiting (wait_event_type expect) */
static void
await_wait(PGconn *monitor, const char *pid, const char *expect, const char *who)
{
	const char *params[1] = {pid};
	char		buf[64];
	struct timespec start,
				now;
	const char *v;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;)
	{
		v = pg_value(monitor, "waiting", 1, params, buf, sizeof(buf));
		if (v != NULL && strcmp(v, expect) == 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (ms_between(&start, &now) > WAIT_LIMIT_S * 1e3)
			fail("%s did not wait (wait_event_type %s, expected %s)", who, v ? v : "NULL", expect);
		sleep_ms(0.5);
	}
}

static void
run_pg(int reps, double *lat)
{
	PGconn	   *holder = pg_connect("the holder");
	PGconn	   *waiter = pg_connect("the waiter");
	PGconn	   *monitor = pg_connect("the monitor");
	PGconn	   *other = NULL;
	PGconn	   *first = NULL;
	PGconn	   *follower = NULL;
	pthread_t	follower_thread;
	pthread_t	thread;
	pthread_t	first_thread;
	char		pid[16];
	char		first_pid[16];
	const char *expect = kind == K_SEMAPHORE ? "Extension" : "Lock";
	struct timespec released;
	unsigned short seed[3] = {(unsigned short) getpid(), 0x4321, 0x8765};

	pg_prepare_lock(holder);
	pg_prepare_lock(waiter);
	pg_prepare(monitor, "waiting", "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", 1);
	snprintf(pid, sizeof(pid), "%d", PQbackendPID(waiter));
	if (kind == K_SEMAPHORE)
	{
		/* the permit held all along (permit 1) */
		other = pg_connect("the other holder");
		pg_prepare_lock(other);
		pg_true(other, "try", "the other holder's dlock_try");
	}

	if (follower_kind())
	{
		PGresult   *res;

		snprintf(candidate_pid, sizeof(candidate_pid), "%d", PQbackendPID(waiter));
		follower = pg_connect("the follower");
		if (kind == K_FOLLOWER_NOTIFY)
		{
			res = PQexec(follower, "LISTEN dlock");
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				fail("LISTEN dlock: %s", PQresultErrorMessage(res));
			PQclear(res);
		}
		else
			pg_prepare(follower, "holder",
					   "SELECT max(pid)::text FROM dlock_locks WHERE name = $1 AND granted", 1);
		if (pthread_create(&follower_thread, NULL, pg_follower, follower) != 0)
			fail("cannot start a thread");
	}
	if (kind == K_DETACHED_SECOND)
	{
		first = pg_connect("the first in line");
		pg_prepare_lock(first);
		snprintf(first_pid, sizeof(first_pid), "%d", PQbackendPID(first));
		if (pthread_barrier_init(&first_go, NULL, 2) != 0 ||
			pthread_barrier_init(&first_done, NULL, 2) != 0 ||
			pthread_create(&first_thread, NULL, pg_first, first) != 0)
			fail("cannot start a thread");
	}
	if (pthread_create(&thread, NULL, pg_waiter, waiter) != 0)
		fail("cannot start a thread");
	for (int i = -WARMUP; i < reps; i++)
	{
		atomic_store(&saw_other, false);
		pg_true(holder, "try", "the holder's dlock_try");
		/*
		 * a polling follower sees the old leader before the change, which
		 * comes at a random point of its 100 ms poll
		 */
		if (kind == K_FOLLOWER_POLL)
		{
			while (!atomic_load(&saw_other))
				sleep_ms(1);
			sleep_ms(FOLLOWER_POLL_MS * erand48(seed));
		}
		if (first != NULL)
		{
			/* the first in line waits (for its ticket), then the waiter in line */
			pthread_barrier_wait(&first_go);
			await_wait(monitor, first_pid, "Lock", "the first in line");
		}
		pthread_barrier_wait(&go);
		await_wait(monitor, pid, expect, "the waiter");
		clock_gettime(CLOCK_MONOTONIC, &released);
		pg_true(holder, "unlock", "the holder's dlock_unlock");
		pthread_barrier_wait(&done);
		if (first != NULL)
			pthread_barrier_wait(&first_done);
		if (i >= 0)
			lat[i] = ms_between(&released, &granted);
		if (ms_between(&released, &granted) < 0)
			fail("the waiter was granted %.4f ms before the release", -ms_between(&released, &granted));
	}
	atomic_store(&quit, true);
	pthread_barrier_wait(&go);
	pthread_join(thread, NULL);
	if (follower != NULL)
	{
		pthread_join(follower_thread, NULL);
		PQfinish(follower);
	}
	if (first != NULL)
	{
		pthread_barrier_wait(&first_go);
		pthread_join(first_thread, NULL);
		PQfinish(first);
	}
	if (other != NULL)
	{
		pg_true(other, "unlock", "the other holder's dlock_unlock");
		PQfinish(other);
	}
	PQfinish(monitor);
	PQfinish(waiter);
	PQfinish(holder);
}

/* ---- Redis ---- */

#ifdef WITH_HIREDIS
static redisContext *
redis_connect(void)
{
	redisContext *rc = redisConnectUnix(target);

	if (rc == NULL)
		fail("cannot connect to %s", target);
	if (rc->err)
		fail("cannot connect to %s: %s", target, rc->errstr);
	return rc;
}

static redisReply *
redis_cmd(redisContext *rc, const char *what, void *reply)
{
	if (reply == NULL)
		fail("%s failed: %s", what, rc->errstr);
	if (((redisReply *) reply)->type == REDIS_REPLY_ERROR)
		fail("%s failed: %s", what, ((redisReply *) reply)->str);
	return reply;
}

/* SET NX PX: true if it set the key */
static bool
redis_set(redisContext *rc, const char *token)
{
	redisReply *r = redis_cmd(rc, "SET NX PX",
							  redisCommand(rc, "SET %s %s NX PX %d", name, token, LEASE_MS));
	bool		ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;

	if (!ok && r->type != REDIS_REPLY_NIL)
		fail("SET %s NX PX: unexpected reply type %d", name, r->type);
	freeReplyObject(r);
	return ok;
}

static void
redis_del(redisContext *rc, const char *who)
{
	redisReply *r = redis_cmd(rc, "DEL", redisCommand(rc, "DEL %s", name));

	if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
		fail("%s's DEL %s did not delete it", who, name);
	freeReplyObject(r);
}

static void *
redis_waiter(void *arg)
{
	redisContext *rc = arg;

	for (;;)
	{
		pthread_barrier_wait(&go);
		if (atomic_load(&quit))
			break;
		while (!redis_set(rc, "waiter"))
		{
			atomic_fetch_add(&refusals, 1);
			sleep_ms(POLL_MS);
		}
		clock_gettime(CLOCK_MONOTONIC, &granted);
		redis_del(rc, "the waiter");
		pthread_barrier_wait(&done);
	}
	return NULL;
}

static void
run_redis(int reps, double *lat)
{
	redisContext *holder = redis_connect();
	redisContext *waiter = redis_connect();
	pthread_t	thread;
	struct timespec released;
	unsigned short seed[3] = {(unsigned short) getpid(), 0x1234, 0x5678};
	redisReply *r;

	/* a key left by an earlier run that failed half-way */
	r = redis_cmd(holder, "DEL", redisCommand(holder, "DEL %s", name));
	freeReplyObject(r);

	if (pthread_create(&thread, NULL, redis_waiter, waiter) != 0)
		fail("cannot start a thread");
	for (int i = -WARMUP; i < reps; i++)
	{
		struct timespec start,
					now;

		if (!redis_set(holder, "holder"))
			fail("the holder's SET %s NX PX did not set it", name);
		atomic_store(&refusals, 0);
		pthread_barrier_wait(&go);
		/* the waiter polls: release at a random point of its 10 ms poll */
		clock_gettime(CLOCK_MONOTONIC, &start);
		while (atomic_load(&refusals) == 0)
		{
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (ms_between(&start, &now) > WAIT_LIMIT_S * 1e3)
				fail("the waiter did not try");
			sleep_ms(0.1);
		}
		sleep_ms(POLL_MS + POLL_MS * erand48(seed));
		clock_gettime(CLOCK_MONOTONIC, &released);
		redis_del(holder, "the holder");
		pthread_barrier_wait(&done);
		if (i >= 0)
			lat[i] = ms_between(&released, &granted);
		if (ms_between(&released, &granted) < 0)
			fail("the waiter was granted %.4f ms before the release", -ms_between(&released, &granted));
	}
	atomic_store(&quit, true);
	pthread_barrier_wait(&go);
	pthread_join(thread, NULL);
	redisFree(waiter);
	redisFree(holder);
}
#endif

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			reps;
	char	   *end;
	double	   *lat;
	double	   *sorted;
	int			i;

	if (argc != 4)
	{
		fprintf(stderr, "usage: %s lock|semaphore|redis|detached|detached-second|follower-notify|follower-poll REPS TARGET\n", argv[0]);
		return 2;
	}
	for (i = 0; i < NKINDS; i++)
		if (strcmp(argv[1], kind_names[i]) == 0)
			break;
	if (i == NKINDS)
	{
		fprintf(stderr, "wakeup: unknown kind \"%s\"\n", argv[1]);
		return 2;
	}
	kind = (Kind) i;
	reps = (int) strtol(argv[2], &end, 10);
	if (*end != '\0' || reps < 1 || reps > 100000)
	{
		fprintf(stderr, "wakeup: REPS must be 1 to 100000, not \"%s\"\n", argv[2]);
		return 2;
	}
	target = argv[3];
	name = kind == K_LOCK ? "wake-lock" : kind == K_SEMAPHORE ? "wake-semaphore" :
		kind == K_REDIS ? "wake-redis" : follower_kind() ? "wake-leader" : "wake-detached";

	lat = calloc(reps, sizeof(double));
	sorted = calloc(reps, sizeof(double));
	if (lat == NULL || sorted == NULL ||
		pthread_barrier_init(&go, NULL, 2) != 0 || pthread_barrier_init(&done, NULL, 2) != 0)
	{
		fprintf(stderr, "wakeup: out of memory\n");
		return 1;
	}

	if (kind == K_REDIS)
	{
#ifdef WITH_HIREDIS
		run_redis(reps, lat);
#else
		fprintf(stderr, "wakeup: built without hiredis (-DWITH_HIREDIS), no redis kind\n");
		return 2;
#endif
	}
	else
		run_pg(reps, lat);

	for (i = 0; i < reps; i++)
		printf("sample %.4f\n", lat[i]);
	memcpy(sorted, lat, reps * sizeof(double));
	qsort(sorted, reps, sizeof(double), cmp_double);
	/* p99: nearest rank, the ceil(0.99 n)-th smallest */
	printf("%s reps=%d median_ms=%.4f p99_ms=%.4f min_ms=%.4f max_ms=%.4f\n",
		   kind_names[kind], reps,
		   reps % 2 ? sorted[reps / 2] : (sorted[reps / 2 - 1] + sorted[reps / 2]) / 2,
		   sorted[(99 * reps + 99) / 100 - 1], sorted[0], sorted[reps - 1]);
	free(sorted);
	free(lat);
	return 0;
}
