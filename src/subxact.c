/*
 * subxact.c: a step run in an internal subtransaction (as PL/pgSQL runs a
 * block with an EXCEPTION clause, pl_exec.c): what it did is kept if it
 * returns true, and rolled back if it returns false or raises an error,
 * which then goes on to the caller.  The several-names calls use it, so
 * that the lock manager and dlock's transaction callbacks give back what
 * they took as at any rollback.
 *
 * Layer 1 of the map in dlock.h (the ground): calls nothing of dlock's.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "subxact.h"

bool
dlock_in_subxact(DlockSubxactStep step, void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool keep = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		keep = step(arg);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return keep;
}
