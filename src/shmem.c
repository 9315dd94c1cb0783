/*
 * shmem.c: dlock's shared memory, every part requested and made in one
 * place.
 *
 * Each part is its own ShmemInitStruct, made by the file that owns it; its
 * structure is defined where the files that read or write it see it:
 *
 *   "dlock slots"     slots.h        a slot per backend: its named locks
 *   "dlock tokens"    tokens.c       the fencing-token counter (private; and
 *                                    the "dlock" LWLock tranche, one lock)
 *   "dlock reaper"    leases.h       the lease reaper's wake-up
 *   "dlock detached"  protocol.h     request slots, the lock holder's holds
 *                                    and their fate words, waiter blocks,
 *                                    the lease expiries remembered
 *   "dlock stats"     stats_table.h  the statistics table (and the "dlock
 *                                    stats" tranche, a lock per part)
 *   "dlock permits"   semaphore.c    the wake-ups of semaphore waiters
 *                                    (private)
 *   "dlock faults"    fault.c        the armed fault (private; the fault
 *                                    build only)
 *
 * The parts exist only when the library is preloaded (slots.h,
 * dlock_preloaded); _PG_init installs the hooks below then.
 *
 * Layer 7 of the map in dlock.h (module start): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "dlock.h"
#include "leases.h"
#include "protocol.h"
#include "semaphore.h"
#include "shmem.h"
#include "notify.h"
#include "slots.h"
#include "stats_file.h"
#include "stats_table.h"
#include "tokens.h"

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(dlock_slots_shmem_size());
	RequestAddinShmemSpace(dlock_tokens_shmem_size());
	RequestAddinShmemSpace(dlock_leases_shmem_size());
	RequestAddinShmemSpace(dlock_protocol_shmem_size());
	RequestAddinShmemSpace(dlock_stats_shmem_size());
	RequestAddinShmemSpace(dlock_permits_shmem_size());
	RequestAddinShmemSpace(dlock_notify_shmem_size());
	dlock_tokens_shmem_request();
	dlock_stats_shmem_request();
#ifdef DLOCK_FAULTS
	RequestAddinShmemSpace(dlock_fault_shmem_size());
#endif
}

static void
shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dlock_slots_shmem_init();
	dlock_tokens_shmem_init();
	dlock_leases_shmem_init();
	dlock_protocol_shmem_init();
	dlock_permits_shmem_init();
	dlock_notify_shmem_init();
	/* in the postmaster: what the last clean shutdown kept, saved at exit */
	if (dlock_stats_shmem_init() && !IsUnderPostmaster)
		dlock_stats_file_start();
#ifdef DLOCK_FAULTS
	dlock_fault_shmem_init();
#endif
	LWLockRelease(AddinShmemInitLock);
}

/* From _PG_init, while shared_preload_libraries are loaded. */
void
dlock_shmem_install(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}
