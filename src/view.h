/*
 * view.h: what the view functions share (view_names.c): every name that a
 * backend's slot or a detached hold says is held or awaited, and whether
 * the current user may see a client's address.
 */
#ifndef DLOCK_VIEW_H
#define DLOCK_VIEW_H

#include "detached.h"
#include "slots.h"

/*
 * fn is called with the entry (e) or the hold (h), the other NULL; both are
 * copies that last only until fn returns.
 */
typedef void (*DlockNameFn) (void *arg, int pid, Oid dbid, const DlockEntry *e,
							 const DlockHold *h);
extern void dlock_view_each_name(DlockNameFn fn, void *arg);
extern bool dlock_view_may_see_client(Oid role);

#endif							/* DLOCK_VIEW_H */
