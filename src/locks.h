/* locks.h: dlock.allow_standby_locks, the one setting locks.c owns. */
#ifndef DLOCK_LOCKS_H
#define DLOCK_LOCKS_H

extern bool dlock_allow_standby_locks;

#endif							/* DLOCK_LOCKS_H */
