/*
 * xact.h: the transaction callbacks (xact.c), registered in each backend
 * when it first uses dlock (entries.h), and moved to the front at COMMIT
 * (dlock.c).
 */
#ifndef DLOCK_XACT_H
#define DLOCK_XACT_H

extern void dlock_xact_setup(void);
extern void dlock_xact_callback_first(void);

#endif							/* DLOCK_XACT_H */
