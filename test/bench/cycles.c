/*
 * test/bench/cycles.c: lock cycles per second, the way an application takes
 * a lock: one thread and one connection per client, each client locking its
 * own name ("own-<client>") over and over.  A cycle is an acquire and a
 * release: two blocking round trips, no pipelining.  test/bench/run builds
 * and runs it.
 *
 *   cycles MODE CLIENTS SECONDS TARGET
 *
 * MODE is one of
 *   dlock        SELECT dlock_try($1)                 SELECT dlock_unlock($1)
 *   dlock_lease  SELECT dlock_try($1, lease => '30s') SELECT dlock_unlock($1)
 *   detached     SELECT dlock_acquire($1, '30s')      SELECT dlock_release($1, $2)
 *                (the token the acquire returned is $2 of the release)
 *   advisory     SELECT pg_try_advisory_lock($1)      SELECT pg_advisory_unlock($1)
 *                ($1 is the client's number)
 *   semaphore    SELECT dlock_try($1, permits => 3)   SELECT dlock_unlock($1)
 *                (a semaphore of 3 permits nobody else holds: permit 1)
 *   semaphore_p3 the same, with permits 1 and 2 of the client's name held
 *                by two more connections of the client's, taken before the
 *                clock starts and kept to the end: each acquire tries
 *                permits 1 and 2 first and gets permit 3 (checked once, in
 *                dlock_locks, before the clock starts)
 *   redis        SET own-<client> <token> NX PX 30000, then the release
 *                script below (compare the value with the token, delete the
 *                key if they are equal), loaded once with SCRIPT LOAD and
 *                called with EVALSHA; <token> is new for every acquisition
 * TARGET is a libpq connection string for the PostgreSQL modes and the path
 * of the Unix socket for redis.
 *
 * The PostgreSQL statements are prepared once per connection and run with
 * PQexecPrepared, as client drivers do.  Every reply is checked: nobody
 * else wants a client's lock, so an acquire that does not get it, or a
 * release that does not release it, is an error; the program says which and
 * exits 1 at once.
 *
 * Clients connect and prepare first; the clock starts when all are ready.
 * At the end it prints one line:
 *   MODE CLIENTS cycles=N seconds=S cps=C min=A max=B p50_us=M p99_us=P
 * cps is N / S, S runs from the start to the end of the last cycle, and
 * min and max are the fewest and the most cycles one client did.  p50_us
 * and p99_us are the latency of a cycle as the client sees it (from before
 * its acquire is sent to after its release's reply), the median and the
 * 99th percentile over every cycle of every client, in microseconds (to a
 * tenth; a cycle over LATENCY_MAX_US counts as that).
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
#include <sys/random.h>
#include <time.h>

#include <libpq-fe.h>
#ifdef WITH_HIREDIS
#include <hiredis/hiredis.h>
#endif

#ifdef WITH_HIREDIS
#define LEASE_MS 30000

/* KEYS[1] is the lock, ARGV[1] the token of the acquisition to release */
static const char release_script[] =
	"if redis.call('GET', KEYS[1]) == ARGV[1] then "
	"return redis.call('DEL', KEYS[1]) "
	"end "
	"return 0";
static char script_sha[41];		/* its SHA1, from SCRIPT LOAD */
#endif

typedef enum
{
	M_DLOCK,
	M_DLOCK_LEASE,
	M_DETACHED,
	M_ADVISORY,
	M_REDIS,
	M_SEMAPHORE,
	M_SEMAPHORE_P3
} Mode;

static const struct
{
	const char *name;
	const char *acquire;		/* SQL; NULL for redis */
	const char *release;
	int			release_params;
} modes[] = {
	[M_DLOCK] = {"dlock", "SELECT dlock_try($1)", "SELECT dlock_unlock($1)", 1},
	[M_DLOCK_LEASE] = {"dlock_lease", "SELECT dlock_try($1, lease => '30s')",
	"SELECT dlock_unlock($1)", 1},
	[M_DETACHED] = {"detached", "SELECT dlock_acquire($1, '30s')",
	"SELECT dlock_release($1, $2)", 2},
	[M_ADVISORY] = {"advisory", "SELECT pg_try_advisory_lock($1)",
	"SELECT pg_advisory_unlock($1)", 1},
	[M_REDIS] = {"redis", NULL, NULL, 0},
	[M_SEMAPHORE] = {"semaphore", "SELECT dlock_try($1, permits => 3)",
	"SELECT dlock_unlock($1)", 1},
	[M_SEMAPHORE_P3] = {"semaphore_p3", "SELECT dlock_try($1, permits => 3)",
	"SELECT dlock_unlock($1)", 1},
};

static Mode mode;
static const char *target;
static pthread_barrier_t ready;
static atomic_bool stop;

/* cycle latencies: a histogram of 100 ns buckets per client, to 20 ms */
#define LATENCY_BUCKET_NS 100
#define LATENCY_MAX_US 20000
#define LATENCY_BUCKETS (LATENCY_MAX_US * 1000 / LATENCY_BUCKET_NS + 1)

typedef struct
{
	int			client;
	pthread_t	thread;
	uint64_t	cycles;
	struct timespec end;
	uint32_t   *latency;		/* LATENCY_BUCKETS counts */
} Client;

static void
count_latency(Client *c, const struct timespec *from)
{
	struct timespec now;
	int64_t		ns;
	int64_t		b;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = (int64_t) (now.tv_sec - from->tv_sec) * 1000000000 + (now.tv_nsec - from->tv_nsec);
	b = ns / LATENCY_BUCKET_NS;
	c->latency[b < LATENCY_BUCKETS - 1 ? (b < 0 ? 0 : b) : LATENCY_BUCKETS - 1]++;
}

static void
fail(int client, const char *fmt,...)
{
	va_list		ap;

	fflush(stdout);
	if (client < 0)
		fprintf(stderr, "cycles: %s: ", modes[mode].name);
	else
		fprintf(stderr, "cycles: %s, client %d: ", modes[mode].name, client);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double
seconds_between(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) + (b->tv_nsec - a->tv_nsec) / 1e9;
}

/*
 * The one value of a one-row, one-column result, or NULL for an SQL NULL;
 * anything else is an error.  The result stays the caller's to clear.
 */
static const char *
one_value(int client, const char *what, PGresult *res)
{
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fail(client, "%s failed: %s", what, PQresultErrorMessage(res));
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
		fail(client, "%s returned %d rows of %d columns, expected one value",
			 what, PQntuples(res), PQnfields(res));
	return PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
}

/* "t", or else an error that says what came back */
static void
expect_true(int client, const char *what, PGresult *res)
{
	const char *v = one_value(client, what, res);

	if (v == NULL || strcmp(v, "t") != 0)
		fail(client, "%s returned %s, expected true", what, v ? v : "NULL");
}

static void
pg_client(Client *c)
{
	PGconn	   *conn = PQconnectdb(target);
	PGresult   *res;
	char		name[32];
	char		token[32];
	const char *params[2] = {name, token};
	const char *v;
	PGconn	   *others[2] = {NULL, NULL};

	if (PQstatus(conn) != CONNECTION_OK)
		fail(c->client, "cannot connect: %s", PQerrorMessage(conn));
	if (mode == M_ADVISORY)
		snprintf(name, sizeof(name), "%d", c->client);
	else
		snprintf(name, sizeof(name), "own-%d", c->client);

	res = PQprepare(conn, "acquire", modes[mode].acquire, 1, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail(c->client, "cannot prepare %s: %s", modes[mode].acquire, PQresultErrorMessage(res));
	PQclear(res);
	res = PQprepare(conn, "release", modes[mode].release, modes[mode].release_params, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail(c->client, "cannot prepare %s: %s", modes[mode].release, PQresultErrorMessage(res));
	PQclear(res);

	if (mode == M_SEMAPHORE_P3)
	{
		/* permits 1 and 2 held by two more connections */
		for (int i = 0; i < 2; i++)
		{
			others[i] = PQconnectdb(target);
			if (PQstatus(others[i]) != CONNECTION_OK)
				fail(c->client, "cannot connect: %s", PQerrorMessage(others[i]));
			res = PQexecParams(others[i], modes[mode].acquire, 1, NULL, params, NULL, NULL, 0);
			expect_true(c->client, "a permit holder's dlock_try($1, permits => 3)", res);
			PQclear(res);
		}
		/* and this connection gets permit 3 */
		res = PQexecPrepared(conn, "acquire", 1, params, NULL, NULL, 0);
		expect_true(c->client, modes[mode].acquire, res);
		PQclear(res);
		res = PQexecParams(conn, "SELECT permit FROM dlock_locks WHERE name = $1 AND pid = pg_backend_pid()",
						   1, NULL, params, NULL, NULL, 0);
		v = one_value(c->client, "the permit in dlock_locks", res);
		if (v == NULL || strcmp(v, "3") != 0)
			fail(c->client, "got permit %s, expected 3", v ? v : "NULL");
		PQclear(res);
		res = PQexecPrepared(conn, "release", 1, params, NULL, NULL, 0);
		expect_true(c->client, modes[mode].release, res);
		PQclear(res);
	}

	pthread_barrier_wait(&ready);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
	{
		struct timespec from;

		clock_gettime(CLOCK_MONOTONIC, &from);
		res = PQexecPrepared(conn, "acquire", 1, params, NULL, NULL, 0);
		if (mode == M_DETACHED)
		{
			v = one_value(c->client, modes[mode].acquire, res);
			if (v == NULL)
				fail(c->client, "%s returned NULL: lock not acquired", modes[mode].acquire);
			if (strlen(v) >= sizeof(token))
				fail(c->client, "%s returned \"%s\", not a token", modes[mode].acquire, v);
			strcpy(token, v);
		}
		else
			expect_true(c->client, modes[mode].acquire, res);
		PQclear(res);

		res = PQexecPrepared(conn, "release", modes[mode].release_params, params, NULL, NULL, 0);
		expect_true(c->client, modes[mode].release, res);
		PQclear(res);
		count_latency(c, &from);
		c->cycles++;
	}
	clock_gettime(CLOCK_MONOTONIC, &c->end);
	for (int i = 0; i < 2; i++)
		if (others[i] != NULL)
			PQfinish(others[i]);
	PQfinish(conn);
}

#ifdef WITH_HIREDIS
static redisContext *
redis_connect(int client)
{
	redisContext *rc = redisConnectUnix(target);

	if (rc == NULL)
		fail(client, "cannot connect to %s", target);
	if (rc->err)
		fail(client, "cannot connect to %s: %s", target, rc->errstr);
	return rc;
}

static redisReply *
redis_reply(int client, redisContext *rc, void *reply, const char *what)
{
	if (reply == NULL)
		fail(client, "%s failed: %s", what, rc->errstr);
	if (((redisReply *) reply)->type == REDIS_REPLY_ERROR)
		fail(client, "%s failed: %s", what, ((redisReply *) reply)->str);
	return reply;
}

static void
redis_client(Client *c)
{
	redisContext *rc = redis_connect(c->client);
	redisReply *r;
	char		key[32];
	char		token[64];
	uint64_t	prefix;
	uint64_t	n = 0;

	snprintf(key, sizeof(key), "own-%d", c->client);
	/* tokens: a random 64-bit prefix of this client's, then a counter */
	if (getrandom(&prefix, sizeof(prefix), 0) != sizeof(prefix))
		fail(c->client, "getrandom: %s", strerror(errno));

	pthread_barrier_wait(&ready);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
	{
		struct timespec from;

		clock_gettime(CLOCK_MONOTONIC, &from);
		snprintf(token, sizeof(token), "%016" PRIx64 "-%" PRIu64, prefix, ++n);
		r = redis_reply(c->client, rc,
						redisCommand(rc, "SET %s %s NX PX %d", key, token, LEASE_MS), "SET NX PX");
		if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
			fail(c->client, "SET %s NX PX did not set it (reply type %d): lock not acquired",
				 key, r->type);
		freeReplyObject(r);

		r = redis_reply(c->client, rc,
						redisCommand(rc, "EVALSHA %s 1 %s %s", script_sha, key, token), "EVALSHA");
		if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
			fail(c->client, "the release script did not delete %s (reply type %d, %lld)",
				 key, r->type, r->type == REDIS_REPLY_INTEGER ? r->integer : 0LL);
		freeReplyObject(r);
		count_latency(c, &from);
		c->cycles++;
	}
	clock_gettime(CLOCK_MONOTONIC, &c->end);
	redisFree(rc);
}

/* SCRIPT LOAD, once for all clients: its SHA1 goes to script_sha */
static void
load_script(void)
{
	redisContext *rc = redis_connect(-1);
	redisReply *r = redis_reply(-1, rc, redisCommand(rc, "SCRIPT LOAD %s", release_script),
								"SCRIPT LOAD");

	if (r->type != REDIS_REPLY_STRING || r->len != 40)
		fail(-1, "SCRIPT LOAD did not return a SHA1 (reply type %d)", r->type);
	memcpy(script_sha, r->str, 40);
	script_sha[40] = '\0';
	freeReplyObject(r);
	redisFree(rc);
}
#endif

static void *
run_client(void *arg)
{
	Client	   *c = arg;

#ifdef WITH_HIREDIS
	if (mode == M_REDIS)
	{
		redis_client(c);
		return NULL;
	}
#endif
	pg_client(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	int			nclients;
	double		secs;
	double		elapsed = 0;
	char	   *end;
	Client	   *clients;
	struct timespec start,
				pause;
	uint64_t	total = 0,
				least = UINT64_MAX,
				most = 0;
	uint64_t   *latency;
	double		p50 = 0,
				p99 = 0;
	int			i;

	if (argc != 5)
	{
		fprintf(stderr, "usage: %s dlock|dlock_lease|detached|advisory|redis|semaphore|semaphore_p3 CLIENTS SECONDS TARGET\n",
				argv[0]);
		return 2;
	}
	for (i = 0; i < (int) (sizeof(modes) / sizeof(modes[0])); i++)
		if (strcmp(argv[1], modes[i].name) == 0)
			break;
	if (i == (int) (sizeof(modes) / sizeof(modes[0])))
	{
		fprintf(stderr, "cycles: unknown mode \"%s\"\n", argv[1]);
		return 2;
	}
	mode = (Mode) i;
	nclients = (int) strtol(argv[2], &end, 10);
	if (*end != '\0' || nclients < 1 || nclients > 1000)
	{
		fprintf(stderr, "cycles: CLIENTS must be 1 to 1000, not \"%s\"\n", argv[2]);
		return 2;
	}
	secs = strtod(argv[3], &end);
	if (*end != '\0' || !(secs > 0))
	{
		fprintf(stderr, "cycles: SECONDS must be a positive number, not \"%s\"\n", argv[3]);
		return 2;
	}
	target = argv[4];

	if (mode == M_REDIS)
	{
#ifdef WITH_HIREDIS
		load_script();
#else
		fprintf(stderr, "cycles: built without hiredis (-DWITH_HIREDIS), no redis mode\n");
		return 2;
#endif
	}

	clients = calloc(nclients, sizeof(Client));
	latency = calloc(LATENCY_BUCKETS, sizeof(uint64_t));
	if (clients == NULL || latency == NULL ||
		pthread_barrier_init(&ready, NULL, nclients + 1) != 0)
	{
		fprintf(stderr, "cycles: out of memory\n");
		return 1;
	}
	for (i = 0; i < nclients; i++)
	{
		clients[i].latency = calloc(LATENCY_BUCKETS, sizeof(uint32_t));
		if (clients[i].latency == NULL)
		{
			fprintf(stderr, "cycles: out of memory\n");
			return 1;
		}
	}
	for (i = 0; i < nclients; i++)
	{
		clients[i].client = i;
		if (pthread_create(&clients[i].thread, NULL, run_client, &clients[i]) != 0)
		{
			fprintf(stderr, "cycles: cannot start a thread\n");
			return 1;
		}
	}

	pthread_barrier_wait(&ready);
	clock_gettime(CLOCK_MONOTONIC, &start);
	pause.tv_sec = (time_t) secs;
	pause.tv_nsec = (long) ((secs - (double) pause.tv_sec) * 1e9);
	while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
		;
	atomic_store(&stop, true);

	for (i = 0; i < nclients; i++)
	{
		double		s;

		pthread_join(clients[i].thread, NULL);
		s = seconds_between(&start, &clients[i].end);
		if (s > elapsed)
			elapsed = s;
		total += clients[i].cycles;
		if (clients[i].cycles < least)
			least = clients[i].cycles;
		if (clients[i].cycles > most)
			most = clients[i].cycles;
		for (int b = 0; b < LATENCY_BUCKETS; b++)
			latency[b] += clients[i].latency[b];
		free(clients[i].latency);
	}
	/* the bucket where the 50th and the 99th percentile fall, its middle */
	{
		uint64_t	seen = 0;
		uint64_t	at50 = (total + 1) / 2;
		uint64_t	at99 = total - total / 100;

		for (int b = 0; b < LATENCY_BUCKETS && total > 0; b++)
		{
			double		us = (b + 0.5) * LATENCY_BUCKET_NS / 1000.0;

			if (seen < at50 && seen + latency[b] >= at50)
				p50 = us;
			if (seen < at99 && seen + latency[b] >= at99)
				p99 = us;
			seen += latency[b];
		}
	}
	printf("%s %d cycles=%" PRIu64 " seconds=%.4f cps=%.1f min=%" PRIu64 " max=%" PRIu64
		   " p50_us=%.1f p99_us=%.1f\n",
		   modes[mode].name, nclients, total, elapsed, total / elapsed, least, most, p50, p99);
	free(latency);
	free(clients);
	return 0;
}
