/*
 * workers.h: the entry points of dlock's background workers, started by the
 * postmaster by name (dlock.c registers them; detached_wait.c starts
 * waiters): the lease reaper (reaper.c), the lock holder (holder.c) and a
 * waiter (waiter.c).
 */
#ifndef DLOCK_WORKERS_H
#define DLOCK_WORKERS_H

#include "fmgr.h"

extern PGDLLEXPORT void dlock_reaper_main(Datum arg);
extern PGDLLEXPORT void dlock_holder_main(Datum arg);
extern PGDLLEXPORT void dlock_waiter_main(Datum arg);

#endif							/* DLOCK_WORKERS_H */
