# dlock: named, lease-aware advisory locks for PostgreSQL (PGXS build)
#
#   make && make install                     build and install for the pg_config in PATH
#   make PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config ...   for another major
#   make installcheck                        regress, isolation and TAP tests, each on a
#                                            temporary server with dlock preloaded
#   make installcheck-nopreload              the no-preload test on a server without it
#
# The tests start their own servers (initdb refuses root: run them as an
# ordinary user).  test/run runs these and the client tests for every major.

MODULE_big = dlock
OBJS = src/sha256.o src/name.o src/hints.o src/changecount.o src/subxact.o src/slots.o src/entry_index.o \
	src/entries.o src/semaphore.o src/tokens.o src/leases.o src/stats_table.o src/stats.o src/stats_file.o src/confirm.o src/notify.o \
	src/protocol.o src/lock_wait.o src/locks.o src/locks_many.o src/update.o src/request.o src/detached_xact.o src/detached_wait.o src/detached_line.o \
	src/detached.o src/view_names.o src/view_locks.o src/view_stats.o src/xact.o \
	src/reaper.o src/serve.o src/holder.o src/waiter.o src/notifier.o src/shmem.o src/dlock.o
EXTENSION = dlock
DATA = sql/dlock--1.0.sql sql/dlock--1.0--1.1.sql sql/dlock--1.1--1.2.sql \
	sql/dlock--1.2--1.3.sql sql/dlock--1.3--1.4.sql sql/dlock--1.4--1.5.sql sql/dlock--1.5.sql \
	sql/dlock--1.5--1.6.sql sql/dlock--1.6.sql sql/dlock--1.6--1.7.sql
PGFILEDESC = "dlock - named, lease-aware advisory locks"

PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Werror
# the server headers are not ours to keep -Wextra clean: read them as system
# headers (an -isystem directory wins over the same directory given with -I)
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)

# the fault-injection build (test/faults.py): make DLOCK_FAULTS=1.  The
# normal build has no fault point at all (src/fault.h).
ifdef DLOCK_FAULTS
OBJS += src/fault.o
PG_CPPFLAGS += -DDLOCK_FAULTS
endif
EXTRA_CLEAN += src/fault.o src/fault.bc

REGRESS = dlock_key dlock_calls dlock_basic dlock_errors dlock_xact dlock_view dlock_many \
	dlock_lease dlock_token dlock_detached dlock_stats dlock_ms dlock_info dlock_min_hold dlock_several dlock_semaphore dlock_positional dlock_hints dlock_force dlock_update dlock_upgrade
REGRESS_OPTS = --temp-instance=tmp_check_regress --temp-config=test/dlock.conf \
	--load-extension=dlock
ISOLATION = contention timeout deadlock xact_release lease_session lease_xact shared_modes update_mode leader min_hold several semaphore semaphore_mixed positional \
	detached stats
ISOLATION_OPTS = --inputdir=test/isolation --temp-instance=tmp_check_isolation \
	--temp-config=test/dlock.conf
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl
REGRESS_NOPRELOAD = dlock_nopreload

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after the include: Makefile.global empties it
PROVE_FLAGS += -I test/t

# PGXS tracks no header changes: every object depends on every header
$(OBJS) $(OBJS:.o=.bc): $(wildcard src/*.h)

installcheck-nopreload:
	$(pg_regress_installcheck) --temp-instance=tmp_check_nopreload \
		--load-extension=dlock $(REGRESS_NOPRELOAD)

.PHONY: installcheck-nopreload

# test/run reads the test lists from here
print-%:
	@echo $($*)
