/*
 * slots.c: the per-backend slots in shared memory (slots.h), and reading
 * them.
 *
 * Invariant: dlock_slots is set only when the library was preloaded; every
 * feature that needs shared memory (names in the view, leases, tokens,
 * statistics, detached locks) checks that through dlock_require_preload,
 * while plain locking works without it.
 *
 * Layer 2 of the map in dlock.h (shared memory and per-backend records):
 * calls only files listed before it there.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"

#include "dlock.h"
#include "changecount.h"
#include "slots.h"

DlockSlots *dlock_slots = NULL;
int			dlock_max_locks_per_session = 64;

/*
 * The error for a feature that needs the library preloaded; detail says
 * what the feature keeps in shared memory.
 */
void
dlock_require_preload(const char *detail)
{
	if (dlock_slots == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock must be loaded via \"shared_preload_libraries\""),
				 errdetail_internal("%s", detail),
				 errhint("Add dlock to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static Size
slot_size(int entries)
{
	return MAXALIGN(offsetof(DlockSlot, entries) + sizeof(DlockEntry) * entries);
}

Size
dlock_slots_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(DlockSlots)),
					mul_size(MaxBackends, slot_size(dlock_max_locks_per_session)));
}

/* At start-up, with AddinShmemInitLock held (shmem.c). */
void
dlock_slots_shmem_init(void)
{
	bool		found;
	DlockSlots *s = ShmemInitStruct("dlock slots", dlock_slots_shmem_size(), &found);

	dlock_slots = s;
	if (found)
		return;
	memset(s, 0, dlock_slots_shmem_size());
	s->nslots = MaxBackends;
	s->entries_per_slot = dlock_max_locks_per_session;
	s->slot_size = slot_size(dlock_max_locks_per_session);
	for (int i = 0; i < s->nslots; i++)
		pg_atomic_init_u32(&dlock_slot(i)->changecount, 0);
}

DlockSlot *
dlock_slot(int i)
{
	return (DlockSlot *) ((char *) dlock_slots + MAXALIGN(sizeof(DlockSlots)) +
						  dlock_slots->slot_size * i);
}

/*
 * Copy a slot's entries in use so far into buf (room for cap entries), with
 * its pid and database; -1 (nothing copied) if they do not fit.
 */
int
dlock_slot_read_entries(DlockSlot *src, DlockEntry *buf, int cap, int *pid, Oid *dbid)
{
	int			tries = 0;

	for (;;)
	{
		uint32		before = dlock_read_begin(&src->changecount, &tries);
		int			n = src->nused;

		if (n < 0 || n > dlock_slots->entries_per_slot)
			n = 0;				/* torn read; the recheck below retries */
		*pid = src->pid;
		*dbid = src->dbid;
		if (n <= cap)
			memcpy(buf, src->entries, sizeof(DlockEntry) * n);
		if (dlock_read_done(&src->changecount, before))
			return n <= cap ? n : -1;
	}
}

/*
 * Copy slot src into copy; limit as in dlock_read_begin_within (false: the
 * slot's owner did not finish a change in time, and copy is not to be used).
 */
bool
dlock_slot_read(DlockSlot *src, DlockSlot *copy, int limit)
{
	int			tries = 0;

	for (;;)
	{
		uint32		before;
		int			n;

		if (!dlock_read_begin_within(&src->changecount, &tries, limit, &before))
			return false;

		copy->pid = src->pid;
		copy->generation = src->generation;
		copy->dbid = src->dbid;
		n = src->nused;
		if (n < 0 || n > dlock_slots->entries_per_slot)
			n = 0;				/* torn read; the recheck below retries */
		copy->nused = n;
		memcpy(copy->entries, src->entries, sizeof(DlockEntry) * n);
		if (dlock_read_done(&src->changecount, before))
			return true;
	}
}
