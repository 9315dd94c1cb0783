# test/lib.sh: shared by test/demo, test/run and test/bench/run (source it).
#
# Everything runs as root on Debian 12; PostgreSQL itself runs as the
# postgres user (it refuses root).  Scratch clusters live in /tmp/dlock-<port>.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin
export PATH="$PGBIN:$PATH"

say() { printf '== %s\n' "$*"; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "run this as root (it installs packages and starts PostgreSQL as postgres)" >&2
		exit 2
	fi
}

# Debian packages this project needs; only missing ones are installed.
DEPS=(postgresql-15 postgresql-server-dev-15 make gcc python3 python3-psycopg2 pgbouncer)

install_deps() {
	local missing=() p
	for p in "${DEPS[@]}" "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing Debian packages: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

build_install() {
	say "building and installing dlock"
	make -C "$TOP" -s PG_CONFIG="$PGBIN/pg_config" >/dev/null
	make -C "$TOP" -s PG_CONFIG="$PGBIN/pg_config" install >/dev/null
}

as_pg() { runuser -u postgres -- "$@"; }

# start_cluster PORT PRELOAD(yes|no) [extra postgresql.conf lines...]
# Makes a fresh cluster in /tmp/dlock-PORT (the socket is there too) and
# starts it listening on the Unix socket and on 127.0.0.1.
start_cluster() {
	local port=$1 preload=$2 dir=/tmp/dlock-$1
	shift 2
	stop_cluster "$port"
	rm -rf "$dir"
	mkdir -p "$dir"
	chown postgres:postgres "$dir"
	as_pg initdb -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
	{
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "listen_addresses = '127.0.0.1'"
		echo "max_connections = 50"
		echo "deadlock_timeout = 200ms"
		echo "logging_collector = off"
		[ "$preload" = yes ] && echo "shared_preload_libraries = 'dlock'"
		local line
		for line in "$@"; do echo "$line"; done
	} >>"$dir/data/postgresql.conf"
	as_pg pg_ctl -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
}

stop_cluster() {
	local dir=/tmp/dlock-$1
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_pg pg_ctl -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
	fi
}

# psql against a scratch cluster: pg PORT [psql args...]
pg() {
	local port=$1
	shift
	psql -X -q -h "/tmp/dlock-$port" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}
