# test/lib.sh: shared by test/demo, test/run and test/bench/run (source it).
#
# Everything runs as root on Debian 12; PostgreSQL itself runs as the
# postgres user (it refuses root).  Scratch clusters live in /tmp/dlock-<port>.
#
# PG_MAJOR selects the PostgreSQL major (default: the host's, 15); PGBIN is
# its bin directory.  Majors other than the host's run inside a Debian
# chroot (test/majors.sh).

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '== %s (%s)\n' "$*" "$(date +%T)"; }

# shellcheck source=test/majors.sh
source "$TOP/test/majors.sh"

PG_MAJOR=${PG_MAJOR:-$HOST_MAJOR}
PGBIN=/usr/lib/postgresql/$PG_MAJOR/bin
export PATH="$PGBIN:$PATH" PG_MAJOR PGBIN

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "run this as root (it installs packages and starts PostgreSQL as postgres)" >&2
		exit 2
	fi
}

# check_major N: exits with a message unless N is a supported major.
check_major() {
	local m
	for m in "${SUPPORTED_MAJORS[@]}"; do [ "$m" = "$1" ] && return 0; done
	echo "PostgreSQL $1 is not supported; supported: ${SUPPORTED_MAJORS[*]}" >&2
	exit 2
}

# The Debian packages this major needs, installed where missing (on the host,
# or inside a chroot when run there).
install_deps() {
	local missing=() p
	# shellcheck disable=SC2046
	for p in $(major_deps "$PG_MAJOR") "$@"; do
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
	say "building and installing dlock for PostgreSQL $PG_MAJOR"
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
	as_pg "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
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
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
}

stop_cluster() {
	local dir=/tmp/dlock-$1
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
	fi
}

# psql against a scratch cluster: pg PORT [psql args...]
pg() {
	local port=$1
	shift
	"$PGBIN/psql" -X -q -h "/tmp/dlock-$port" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}

# stage_tree DEST: a copy of the source tree as it is (tracked and untracked
# files, not what git ignores), for a build that writes nothing into TOP.
stage_tree() {
	local dest=$1
	rm -rf "$dest"
	mkdir -p "$dest"
	if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$TOP" && git ls-files -co --exclude-standard -z | tar cf - --null -T -) | tar xf - -C "$dest"
	else
		(cd "$TOP" && tar cf - --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
			--exclude=./results --exclude=./tmp_check --exclude=./output_iso .) | tar xf - -C "$dest"
	fi
}

# in_major N CMD...: run a command for major N: on the host for the host's
# major, otherwise inside that major's chroot, with this environment's
# DLOCK_* settings.
in_major() {
	local major=$1 kv envs=()
	shift
	if [ "$major" = "$HOST_MAJOR" ]; then
		env PG_MAJOR="$major" "$@"
	else
		while IFS= read -r kv; do envs+=("$kv"); done < <(env | grep '^DLOCK_' || true)
		chroot "$(chroot_dir "$major")" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 PG_MAJOR="$major" "${envs[@]}" "$@"
	fi
}

# major_root N: where major N's file system starts ("" for the host)
major_root() {
	if [ "$1" = "$HOST_MAJOR" ]; then echo ""; else chroot_dir "$1"; fi
}

# run_staged N DIR SCRIPT ARGS...: a copy of this tree in DIR (inside major
# N's chroot unless N is the host's; the chroot is made on first use), owned
# by postgres, and SCRIPT (relative to the tree) run there for major N.
run_staged() {
	local major=$1 dir=$2 script=$3
	shift 3
	[ "$major" = "$HOST_MAJOR" ] || ensure_chroot "$major" || return 1
	stage_tree "$(major_root "$major")$dir"
	in_major "$major" chown -R postgres:postgres "$dir"
	in_major "$major" bash "$dir/$script" "$@"
}
