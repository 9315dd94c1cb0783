/* stats_file.h: the statistics table across a clean restart (stats_file.c). */
#ifndef DLOCK_STATS_FILE_H
#define DLOCK_STATS_FILE_H

extern void dlock_stats_file_start(void);

#endif							/* DLOCK_STATS_FILE_H */
