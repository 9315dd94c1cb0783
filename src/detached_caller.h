/*
 * detached_caller.h: the caller's side of the detached-lock protocol, for
 * its own files: a request and its answer (request.c), the acquisitions of
 * the current transaction (detached_xact.c), a waited acquisition
 * (detached_wait.c), an acquisition: asked, in line (detached_line.c).  Only those and detached.c include it.
 */
#ifndef DLOCK_DETACHED_CALLER_H
#define DLOCK_DETACHED_CALLER_H

#include "protocol.h"

/* request.c */
extern int	dlock_request_procno(void);
extern bool dlock_request_idle(DlockRequest **rp, TimestampTz deadline);
extern bool dlock_request_send(DlockRequest *r, int target_pid, int target_procno,
							   TimestampTz deadline);
extern void dlock_error_raise(const DlockError *e);
extern void dlock_request_sleep(long ms);
extern void dlock_request_exit(void);

/* detached_xact.c */
extern void dlock_acquired_reserve(void);
extern void dlock_acquired_record(bool waiter, int index, uint64 use);
extern void dlock_acquired_note_undo(int index, uint64 ticket);
extern void dlock_acquired_wait_undos(TimestampTz deadline);
extern void dlock_acquired_count(const DlockHold *h, int event, int64 us);
extern void dlock_acquired_exit(void);

/* detached_wait.c */
extern int64 dlock_wait_acquire(const DlockName *name, const DlockHold *tmpl,
								TimestampTz deadline, int64 lease_us, TimestampTz start);
extern void dlock_wait_no_token_error(const DlockName *name, int64 token);
extern void dlock_wait_exit(void);

/* detached_line.c */
extern int64 dlock_detached_take(const DlockName *name, const DlockHold *h, int64 lease_us,
								 int64 timeout_us, int pid, int procno, TimestampTz start);
extern void dlock_line_exit(void);

#endif							/* DLOCK_DETACHED_CALLER_H */
