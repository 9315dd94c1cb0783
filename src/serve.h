/*
 * serve.h: what both kinds of process that hold detached locks do (serve.c):
 * answer the requests addressed to them, keep their holds' records, run
 * their loop.  The lock holder (holder.c) and a waiter (waiter.c) include it.
 */
#ifndef DLOCK_SERVE_H
#define DLOCK_SERVE_H

#include "protocol.h"

/* the request being served, for the error recovery of the lock holder */
extern DlockRequest *dlock_serving;

extern void dlock_serve_free(DlockRequest *r);
extern bool dlock_serve_reply(DlockRequest *r, int result);
extern void dlock_serve_reply_only(DlockRequest *r, int result);
extern int	dlock_serve_check_hold(DlockRequest *r, const DlockHold *h, TimestampTz now);
extern bool dlock_serve_extend_hold(DlockRequest *r, DlockHold *h, TimestampTz now);
extern bool dlock_serve_requests(void (*acquire) (DlockRequest *),
								 void (*other) (DlockRequest *));
extern void dlock_serve_and_poll(void (*acquire) (DlockRequest *),
								 void (*other) (DlockRequest *),
								 const TimestampTz *next_expiry);

extern void dlock_serve_hold_ended(const DlockHold *h);
extern void dlock_serve_end_kind(int kind);
extern void dlock_serve_hold_expired(const DlockHold *h, const char *who);
extern void dlock_serve_hold_times(DlockHold *h, TimestampTz now, int64 lease_us);
extern bool dlock_serve_release_later(DlockRequest *r, DlockHold *h, TimestampTz now);
extern void dlock_serve_forced(DlockRequest *r, const DlockHold *h, TimestampTz now);

extern void dlock_serve_signals(void);
extern void dlock_serve_loop_top(void);
extern void dlock_serve_wait(TimestampTz until);

#endif							/* DLOCK_SERVE_H */
