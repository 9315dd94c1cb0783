/*
 * shmem.h: dlock's shared memory, every part in one place (shmem.c).
 */
#ifndef DLOCK_SHMEM_H
#define DLOCK_SHMEM_H

extern void dlock_shmem_install(void);

#endif							/* DLOCK_SHMEM_H */
