/*
 * entry_index.c: making and growing a backend's index of its entries
 * (entry_index.h).
 *
 * Layer 2 of the map in dlock.h (shared memory and per-backend records):
 * calls only files listed before it there.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "dlock.h"
#include "entry_index.h"

DlockIndex dlock_index = {NULL, 0, 0};

void
dlock_index_init(uint32 size)
{
	DlockIndexEntry *old = dlock_index.tab;
	uint32		oldsize = old ? dlock_index.mask + 1 : 0;
	uint32		i;

	dlock_index.tab = MemoryContextAlloc(TopMemoryContext, sizeof(DlockIndexEntry) * size);
	for (i = 0; i < size; i++)
		dlock_index.tab[i].ref = -1;
	dlock_index.mask = size - 1;
	for (i = 0; i < oldsize; i++)
	{
		uint32		h;

		if (old[i].ref < 0)
			continue;
		h = dlock_index_home(old[i].key, old[i].mode);
		while (dlock_index.tab[h].ref >= 0)
			h = (h + 1) & dlock_index.mask;
		dlock_index.tab[h] = old[i];
	}
	if (old)
		pfree(old);
}
