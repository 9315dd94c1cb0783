/*
 * fault.c: the fault points of the fault-injection build (make
 * DLOCK_FAULTS=1; fault.h).  Not part of the normal build.
 *
 * One action at a time is armed, in shared memory, for one named point and
 * optionally one process: the next time that point is passed, the action
 * happens there (an ERROR, a FATAL, a pending cancel or terminate as if the
 * signal had come right then, the death of the process by SIGKILL, or a
 * stall of some milliseconds during which the process takes no interrupts).
 * test/faults.py creates the SQL functions below itself; no extension script
 * declares them.  (dlock_fault_leaks, which looks at the detached-lock
 * protocol's tables, is in protocol.c.)
 *
 * Layer 1 of the map in dlock.h (the ground): calls no other file of
 * dlock's.
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"

#include "dlock.h"
#include "fault.h"

#define FAULT_NAME_MAX 64

typedef enum FaultAction
{
	FAULT_ERROR,
	FAULT_FATAL,
	FAULT_CANCEL,
	FAULT_TERMINATE,
	FAULT_KILL,
	FAULT_STALL
} FaultAction;

static const char *const action_names[] = {"error", "fatal", "cancel", "terminate", "kill", "stall"};

typedef struct DlockFaults
{
	slock_t		lock;
	bool		armed;
	char		point[FAULT_NAME_MAX];
	int			action;
	int			arg;			/* stall: milliseconds */
	int			pid;			/* 0: any process */
	int			skip;			/* passes to let by first */
	int			hits;			/* times the action happened */
	int			passes;			/* times the point was passed while armed */
} DlockFaults;

static DlockFaults *faults = NULL;

PG_FUNCTION_INFO_V1(dlock_fault_set);
PG_FUNCTION_INFO_V1(dlock_fault_clear);
PG_FUNCTION_INFO_V1(dlock_fault_hits);

Size
dlock_fault_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockFaults));
}

void
dlock_fault_shmem_init(void)
{
	bool		found;

	faults = ShmemInitStruct("dlock faults", sizeof(DlockFaults), &found);
	if (!found)
	{
		memset(faults, 0, sizeof(DlockFaults));
		SpinLockInit(&faults->lock);
	}
}

void
dlock_fault_point(const char *name)
{
	DlockFaults *f = faults;
	bool		fire = false;
	int			action = 0;
	int			arg = 0;

	if (f == NULL || !f->armed)
		return;
	SpinLockAcquire(&f->lock);
	if (f->armed && strcmp(f->point, name) == 0 && (f->pid == 0 || f->pid == MyProcPid))
	{
		f->passes++;
		if (f->skip > 0)
			f->skip--;
		else
		{
			fire = true;
			f->armed = false;
			f->hits++;
			action = f->action;
			arg = f->arg;
		}
	}
	SpinLockRelease(&f->lock);
	if (!fire)
		return;

	elog(LOG, "dlock fault point \"%s\": %s", name, action_names[action]);
	switch ((FaultAction) action)
	{
		case FAULT_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("dlock fault injected at \"%s\"", name)));
			break;
		case FAULT_FATAL:
			ereport(FATAL,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("dlock fault injected at \"%s\"", name)));
			break;
		case FAULT_CANCEL:
			/* as StatementCancelHandler would, had SIGINT come right now */
			QueryCancelPending = true;
			InterruptPending = true;
			SetLatch(MyLatch);
			break;
		case FAULT_TERMINATE:
			ProcDiePending = true;
			InterruptPending = true;
			SetLatch(MyLatch);
			break;
		case FAULT_KILL:
			kill(MyProcPid, SIGKILL);
			pg_usleep(10 * 1000 * 1000L);
			break;
		case FAULT_STALL:
			pg_usleep((long) arg * 1000L);
			break;
	}
}

void
dlock_fault_require(void)
{
	if (faults == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock fault points need dlock in \"shared_preload_libraries\"")));
}

/* dlock_fault_set(point text, action text, arg int, pid int, skip int) */
Datum
dlock_fault_set(PG_FUNCTION_ARGS)
{
	char	   *point = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *action = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			a;

	dlock_fault_require();
	for (a = 0; a < (int) lengthof(action_names); a++)
		if (strcmp(action, action_names[a]) == 0)
			break;
	if (a == (int) lengthof(action_names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown fault action \"%s\"", action)));
	SpinLockAcquire(&faults->lock);
	strlcpy(faults->point, point, FAULT_NAME_MAX);
	faults->action = a;
	faults->arg = PG_GETARG_INT32(2);
	faults->pid = PG_GETARG_INT32(3);
	faults->skip = PG_GETARG_INT32(4);
	faults->hits = 0;
	faults->passes = 0;
	faults->armed = true;
	SpinLockRelease(&faults->lock);
	PG_RETURN_VOID();
}

Datum
dlock_fault_clear(PG_FUNCTION_ARGS)
{
	dlock_fault_require();
	SpinLockAcquire(&faults->lock);
	faults->armed = false;
	SpinLockRelease(&faults->lock);
	PG_RETURN_VOID();
}

/* How often the last armed action happened (0 or 1). */
Datum
dlock_fault_hits(PG_FUNCTION_ARGS)
{
	int			hits;

	dlock_fault_require();
	SpinLockAcquire(&faults->lock);
	hits = faults->hits;
	SpinLockRelease(&faults->lock);
	PG_RETURN_INT32(hits);
}
