/*
 * leases.h: leases on named locks as the holding backend sees them
 * (leases.c), and the lease reaper's wake-up, which every backend that
 * gives a lease may have to bring forward.
 */
#ifndef DLOCK_LEASES_H
#define DLOCK_LEASES_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"

#include "slots.h"

/* Shortest lease the reaper enforces (documented in doc/functions.md). */
#define DLOCK_MIN_LEASE_US ((int64) 100 * 1000)

/* The reaper's part of shared memory (written by the reaper, reaper.c). */
typedef struct DlockReaperWake
{
	int			procno;			/* -1 when no reaper runs */
	pg_atomic_uint64 wakeup;	/* 0: scanning; else next planned wake */
} DlockReaperWake;

extern DlockReaperWake *dlock_reaper_wake;
extern Size dlock_leases_shmem_size(void);
extern void dlock_leases_shmem_init(void);

/*
 * No later than the earliest lease of this backend's holds (0: none given
 * since it was last found to have none).
 */
extern TimestampTz dlock_lease_min;

/*
 * dlock's own SQLSTATEs (class 57, operator intervention, beside 57P01 and
 * 57014, with a subclass of its own): a session ended because a lease of
 * its ran out, and a statement cancelled because a transaction lock's lease
 * ran out (doc/errors.md).
 */
#define DLOCK_ERRCODE_LEASE_SESSION	MAKE_SQLSTATE('5','7','L','0','1')
#define DLOCK_ERRCODE_LEASE_XACT	MAKE_SQLSTATE('5','7','L','0','2')

extern int64 dlock_lease_arg(FunctionCallInfo fcinfo, int argno, int ms_argno);
extern void dlock_lease_explain(ErrorData *edata);
extern void dlock_lease_note_dropped(const DlockEntry *e);
extern void dlock_lease_clear_dropped(void);
extern void dlock_lease_note(TimestampTz expires);
extern void dlock_lease_wake_reaper(TimestampTz expires);
extern bool dlock_lease_ran_out(const DlockEntry *e);
extern void dlock_lease_expired(const char *name, TimestampTz expired);

/* what a holder past its lease must not do */
extern void dlock_lease_refuse_after_expiry(void);
extern void dlock_lease_note_release(const DlockEntry *e);
extern void dlock_lease_refuse_commit(bool prepare);
extern void dlock_lease_refuse_prepare(void);
extern void dlock_lease_clear_release(void);
extern void dlock_lease_forget_stale_holds(void);

#endif							/* DLOCK_LEASES_H */
