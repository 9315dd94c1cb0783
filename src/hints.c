/*
 * hints.c: dlock's word in a report of PostgreSQL's own: a call of a dlock
 * function that PostgreSQL could not match, where a duration was given as a
 * number or as varchar, gets a hint that says what dlock takes.  Called
 * from the report hook (dlock.c); reads only the report's text.
 */
#include "postgres.h"

#include "utils/elog.h"

#include "hints.h"

/*
 * A call of a dlock function that PostgreSQL could not match (42883), as
 * its report is about to go out (emit_log_hook, dlock.c): where a duration
 * was given as a number or as varchar (dlock_lock('job', timeout => 5),
 * dlock_lock('job', 5), or pgjdbc's setString), PostgreSQL's hint ("You
 * might need to add explicit type casts") becomes one that says what dlock
 * takes.  Only for dlock's functions that take an interval, and only for an
 * argument in a duration's place: by name (timeout, lease, min_hold) or by
 * position.  Raises nothing; reads only the message.
 */
static const struct
{
	const char *name;
	int			positions[2];	/* 0-based positions of durations; -1: none */
}			duration_calls[] = {
	{"dlock_try", {2, -1}},
	{"dlock_try_xact", {2, -1}},
	{"dlock_lock", {1, 3}},
	{"dlock_lock_xact", {1, 3}},
	{"dlock_acquire", {1, 2}},
	{"dlock_extend", {2, -1}},
	{"dlock_renew", {1, -1}},
};

/* Is the argument type t (as the message shows it, up to end) a number or varchar? */
static bool
not_an_interval(const char *t, const char *end)
{
	static const char *const types[] = {
		"integer", "bigint", "smallint", "numeric", "double precision", "real", "character varying"
	};

	for (int i = 0; i < (int) lengthof(types); i++)
		if ((size_t) (end - t) == strlen(types[i]) && strncmp(t, types[i], end - t) == 0)
			return true;
	return false;
}

void
dlock_explain_call(ErrorData *edata)
{
	const char *m = edata->message;
	const char *open;
	const char *close;
	const char *fn;
	const char *arg;
	int			call = -1;
	int			pos = 0;
	bool		duration_as_number = false;

	/* a call in a query (a parse position), not DROP FUNCTION or GRANT naming one */
	if (edata->sqlerrcode != ERRCODE_UNDEFINED_FUNCTION || edata->elevel != ERROR || m == NULL ||
		(edata->cursorpos <= 0 && edata->internalpos <= 0) ||
		edata->message_id == NULL || strcmp(edata->message_id, "function %s does not exist") != 0 ||
		strncmp(m, "function ", 9) != 0 || (open = strchr(m, '(')) == NULL ||
		(close = strchr(open, ')')) == NULL)
		return;
	/* the function's name as called, without a schema */
	fn = m + 9;
	for (const char *c = fn; c < open; c++)
		if (*c == '.')
			fn = c + 1;
	for (int i = 0; i < (int) lengthof(duration_calls); i++)
		if ((size_t) (open - fn) == strlen(duration_calls[i].name) &&
			strncmp(fn, duration_calls[i].name, open - fn) == 0)
			call = i;
	if (call < 0)
		return;
	/* the arguments: "type" by position, then "name => type" */
	for (arg = open + 1; arg < close; pos++)
	{
		const char *end = arg;
		const char *arrow;

		while (end < close && *end != ',')
			end++;
		arrow = NULL;
		for (const char *c = arg; c + 3 < end; c++)
			if (strncmp(c, " => ", 4) == 0)
				arrow = c;
		if (arrow != NULL)
		{
			size_t		len = arrow - arg;

			if (((len == 7 && strncmp(arg, "timeout", 7) == 0) ||
				 (len == 5 && strncmp(arg, "lease", 5) == 0) ||
				 (len == 8 && strncmp(arg, "min_hold", 8) == 0)) &&
				not_an_interval(arrow + 4, end))
				duration_as_number = true;
		}
		else if ((pos == duration_calls[call].positions[0] || pos == duration_calls[call].positions[1]) &&
				 not_an_interval(arg, end))
			duration_as_number = true;
		arg = end < close ? end + 2 : close;	/* past ", " */
	}
	if (duration_as_number)
		edata->hint = pstrdup("dlock's durations (timeout, lease, min_hold) are intervals, such as '5 s' or a "
							  "parameter cast to interval; give a number of milliseconds as timeout_ms, "
							  "lease_ms or min_hold_ms, or call the positional forms (dlock_try_ms, "
							  "dlock_lock_ms, dlock_acquire_ms, ...).");
}
