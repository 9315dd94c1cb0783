/*
 * hints.h: dlock's hint in PostgreSQL's report of a call it could not
 * match (hints.c).
 */
#ifndef DLOCK_HINTS_H
#define DLOCK_HINTS_H

#include "utils/elog.h"

extern void dlock_explain_call(ErrorData *edata);

#endif
