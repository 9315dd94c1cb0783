/*
 * entry_index.h: a backend's index of its entries, (key, mode) -> ref, so
 * that finding an entry costs the same with 10 or 10,000 held names.  Open
 * addressing with linear probing, kept at most half full.  Growing it
 * (entry_index.c) is the only step that allocates, and it is done
 * (dlock_index_reserve) before a lock is asked for, so inserting the entry
 * of a grant cannot fail.
 *
 * Backend-local; only entries.c uses it.  The lookups are inline: they are
 * on every lock and unlock.
 */
#ifndef DLOCK_ENTRY_INDEX_H
#define DLOCK_ENTRY_INDEX_H

typedef struct DlockIndexEntry
{
	int64		key;
	int32		ref;			/* -1: empty */
	uint8		mode;
} DlockIndexEntry;

typedef struct DlockIndex
{
	DlockIndexEntry *tab;
	uint32		mask;
	uint32		count;
} DlockIndex;

extern DlockIndex dlock_index;

/* (Re)make the table with size slots (a power of 2), keeping what is in it. */
extern void dlock_index_init(uint32 size);

static inline uint32
dlock_index_home(int64 key, uint8 mode)
{
	/* keys are SHA-256 bits already; the multiply mixes in the mode */
	return (uint32) ((((uint64) key ^ mode) * UINT64CONST(0x9E3779B97F4A7C15)) >> 32) &
		dlock_index.mask;
}

static inline int
dlock_index_find(int64 key, uint8 mode)
{
	uint32		h = dlock_index_home(key, mode);

	for (;;)
	{
		DlockIndexEntry *x = &dlock_index.tab[h];

		if (x->ref < 0)
			return -1;
		if (x->key == key && x->mode == mode)
			return x->ref;
		h = (h + 1) & dlock_index.mask;
	}
}

/* Room for one more, kept at most half full; may allocate. */
static inline void
dlock_index_reserve(void)
{
	if ((dlock_index.count + 1) * 2 > dlock_index.mask + 1)
		dlock_index_init((dlock_index.mask + 1) * 2);
}

static inline void
dlock_index_insert(int64 key, uint8 mode, int ref)
{
	uint32		h = dlock_index_home(key, mode);

	Assert(dlock_index.count * 2 < dlock_index.mask + 1);
	while (dlock_index.tab[h].ref >= 0)
		h = (h + 1) & dlock_index.mask;
	dlock_index.tab[h].key = key;
	dlock_index.tab[h].mode = mode;
	dlock_index.tab[h].ref = ref;
	dlock_index.count++;
}

/* Remove, moving later entries of the probe run back into the gap. */
static inline void
dlock_index_delete(int64 key, uint8 mode)
{
	uint32		i = dlock_index_home(key, mode);
	uint32		j;

	while (dlock_index.tab[i].ref >= 0 &&
		   !(dlock_index.tab[i].key == key && dlock_index.tab[i].mode == mode))
		i = (i + 1) & dlock_index.mask;
	if (dlock_index.tab[i].ref < 0)
		return;
	j = i;
	for (;;)
	{
		uint32		home;

		j = (j + 1) & dlock_index.mask;
		if (dlock_index.tab[j].ref < 0)
			break;
		home = dlock_index_home(dlock_index.tab[j].key, dlock_index.tab[j].mode);
		/* move j into the gap at i unless its home lies in (i, j] */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
		{
			dlock_index.tab[i] = dlock_index.tab[j];
			i = j;
		}
	}
	dlock_index.tab[i].ref = -1;
	dlock_index.count--;
}

#endif							/* DLOCK_ENTRY_INDEX_H */
