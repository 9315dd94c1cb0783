/* locks.h: the settings of session and transaction locks (locks.c). */
#ifndef DLOCK_LOCKS_H
#define DLOCK_LOCKS_H

extern bool dlock_allow_standby_locks;

#endif							/* DLOCK_LOCKS_H */
