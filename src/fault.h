/*
 * fault.h: named fault points for the fault-injection suite (test/faults.py).
 *
 * DLOCK_FAULT("name") marks a step of a lock path where an error, a cancel,
 * a FATAL, a process death or a stall can land.  In the normal build it is
 * nothing at all; built with `make DLOCK_FAULTS=1`, it asks a table in
 * shared memory whether an action is armed for that point (fault.c), in the
 * spirit of PostgreSQL's INJECTION_POINT().
 */
#ifndef DLOCK_FAULT_H
#define DLOCK_FAULT_H

#ifdef DLOCK_FAULTS
extern void dlock_fault_point(const char *name);
extern Size dlock_fault_shmem_size(void);
extern void dlock_fault_shmem_init(void);
extern void dlock_fault_require(void);
#define DLOCK_FAULT(name) dlock_fault_point(name)
#else
#define DLOCK_FAULT(name) ((void) 0)
#endif

#endif							/* DLOCK_FAULT_H */
