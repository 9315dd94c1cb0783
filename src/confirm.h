/*
 * confirm.h: dlock.synchronous_grants (confirm.c): a lock granted on a
 * primary is answered only once its synchronous standbys confirm WAL
 * written after the grant, as a commit is; and noticing, while a call
 * waits, that its client went away.
 */
#ifndef DLOCK_CONFIRM_H
#define DLOCK_CONFIRM_H

#include "datatype/timestamp.h"

#include "name.h"

extern bool dlock_synchronous_grants;

extern void dlock_confirm_grant(const DlockName *names, int n, TimestampTz deadline);
extern TimestampTz dlock_confirm_deadline(TimestampTz call_deadline);

/* while a call waits, a client that went away is noticed (also detached waits) */
extern void dlock_client_check_on(void);
extern void dlock_client_check_off(void);

#endif							/* DLOCK_CONFIRM_H */
