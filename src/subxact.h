/*
 * subxact.h: a step run in an internal subtransaction, kept if it says so
 * (subxact.c).  The ground: calls nothing of dlock's.
 */
#ifndef DLOCK_SUBXACT_H
#define DLOCK_SUBXACT_H

/* A step: true to keep what it did, false to have it rolled back. */
typedef bool (*DlockSubxactStep) (void *arg);

extern bool dlock_in_subxact(DlockSubxactStep step, void *arg);

#endif							/* DLOCK_SUBXACT_H */
