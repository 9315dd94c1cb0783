# dlock: named, lease-aware advisory locks for PostgreSQL (PGXS build)

MODULE_big = dlock
OBJS = src/dlock.o src/locks.o src/name.o src/reaper.o src/sha256.o src/view.o
EXTENSION = dlock
DATA = sql/dlock--1.0.sql
PGFILEDESC = "dlock - named, lease-aware advisory locks"

PG_CFLAGS = -Wall -Wextra -Werror
# the server headers are not ours to keep -Wextra clean: read them as system
# headers (an -isystem directory wins over the same directory given with -I)
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)

# Tests.  test/run runs them all against scratch clusters (see README.md);
# `make installcheck` runs REGRESS and ISOLATION against a server that has
# dlock in shared_preload_libraries.  REGRESS_NOPRELOAD needs a server
# without it.
REGRESS = dlock_key dlock_calls dlock_basic dlock_errors dlock_xact dlock_view dlock_lease dlock_token
REGRESS_NOPRELOAD = dlock_nopreload
ISOLATION = contention timeout deadlock xact_release lease_session lease_xact shared_modes
ISOLATION_OPTS = --inputdir=test/isolation

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every source file includes the shared header (PGXS tracks no header changes)
$(OBJS) $(OBJS:.o=.bc): src/dlock.h

# test/run reads the test lists from here
print-%:
	@echo $($*)
