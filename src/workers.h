/*
 * workers.h: the entry points of dlock's background workers, started by the
 * postmaster by name (dlock.c registers them; detached_wait.c starts
 * waiters; the reaper starts notifiers): the lease reaper (reaper.c), the
 * lock holder (holder.c), a waiter (waiter.c) and a notifier (notifier.c).
 */
#ifndef DLOCK_WORKERS_H
#define DLOCK_WORKERS_H

#include "fmgr.h"

extern PGDLLEXPORT void dlock_reaper_main(Datum arg);
extern PGDLLEXPORT void dlock_holder_main(Datum arg);
extern PGDLLEXPORT void dlock_waiter_main(Datum arg);
extern PGDLLEXPORT void dlock_notifier_main(Datum arg);

#endif							/* DLOCK_WORKERS_H */
