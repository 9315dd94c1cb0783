# test/majors.sh: PostgreSQL majors other than the host's, in Debian chroots.
# Sourced by test/lib.sh.
#
# The host (Debian 12, bookworm) has PostgreSQL 15 from its own packages.
# 17 and 18 come from Debian trixie and forky, 19 from forky with Debian's
# experimental suite added (where its packages are while it is a release
# candidate; taken from there first, and from forky once they move): a
# debootstrap --variant=minbase chroot each, made from the mirror apt already
# uses, kept in /var/tmp/dlock-pgN and reused by later runs.  Inside, the same test scripts
# run with PG_MAJOR=N against the chroot's own packages.
#
# While a chroot is in use, /proc, /dev, /dev/pts and /dev/shm are mounted
# into it; test/run and test/bench/run unmount them when done (test/demo
# leaves them for the server it leaves running; `test/demo --pg N stop`
# unmounts).  Unmount before removing a chroot by hand:
#   umount -R /var/tmp/dlock-pgN/{dev,proc}; rm -rf /var/tmp/dlock-pgN

HOST_MAJOR=15
SUPPORTED_MAJORS=(15 17 18 19)
CHROOT_BASE=${DLOCK_CHROOT_BASE:-/var/tmp}

suite_of_major() {
	case "$1" in
		17) echo trixie ;;
		18 | 19) echo forky ;;
		*) return 1 ;;
	esac
}

# A suite added on top of the major's own, for that major's packages only:
# apt takes what the postgresql-N source builds (the server, its client,
# libpq) from there while the suite has it, and everything else from the
# major's own suite.
extra_suite_of_major() {
	case "$1" in
		19) echo experimental ;;
		*) return 1 ;;
	esac
}

chroot_dir() { echo "$CHROOT_BASE/dlock-pg$1"; }

# The Debian mirror apt on this machine uses (deb822 or one-line sources).
apt_mirror() {
	local uri
	uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '{print $2}' | grep -v -- '-security' | head -n 1)
	if [ -z "$uri" ]; then
		uri=$(grep -hE '^deb +(\[[^]]*\] +)?[a-z]+://' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1}' | grep -v -- '-security' | head -n 1)
	fi
	[ -n "$uri" ] || { echo "cannot tell which Debian mirror apt uses" >&2; return 1; }
	echo "${uri%/}"
}

# Packages every major needs (host and chroots alike).
major_deps() {
	echo "postgresql-$1 postgresql-server-dev-$1 postgresql-client-$1 make gcc libc6-dev" \
		"python3 python3-psycopg2 python3-psycopg pgbouncer perl libipc-run-perl"
}

chroot_mounts() {
	local root=$1 m
	for m in proc dev dev/pts dev/shm; do
		mkdir -p "$root/$m"
		mountpoint -q "$root/$m" && continue
		case "$m" in
			proc) mount -t proc proc "$root/proc" ;;
			dev/shm) mount -t tmpfs -o mode=1777 shm "$root/dev/shm" ;;
			*) mount --bind "/$m" "$root/$m" ;;
		esac
	done
	cp -f /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

chroot_umounts() {
	local root=$1 m
	for m in dev/shm dev/pts dev proc; do
		mountpoint -q "$root/$m" && umount -l "$root/$m"
	done
	return 0
}

# ensure_chroot N: make (once) the chroot for major N with its packages.
ensure_chroot() {
	local major=$1 root suite extra mirror script=""
	root=$(chroot_dir "$major")
	suite=$(suite_of_major "$major") || { echo "unsupported major $major" >&2; return 1; }
	extra=$(extra_suite_of_major "$major") || extra=
	if [ ! -f "$root/.dlock-ready" ]; then
		mirror=$(apt_mirror) || return 1
		dpkg-query -W -f='${Status}' debootstrap 2>/dev/null | grep -q 'install ok installed' || {
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
		}
		# debootstrap has no script for the newest suites; sid's fits them
		[ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
		say "making a Debian $suite chroot for PostgreSQL $major in $root (once; later runs reuse it)"
		chroot_umounts "$root"
		rm -rf "$root"
		mkdir -p "$root"
		if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" $script >"$root.debootstrap.log" 2>&1; then
			echo "debootstrap failed; the last lines of $root.debootstrap.log:" >&2
			tail -n 20 "$root.debootstrap.log" >&2
			return 1
		fi
		printf 'Acquire::Check-Valid-Until "false";\n' >"$root/etc/apt/apt.conf.d/99dlock-no-valid-until"
		printf 'APT::Install-Recommends "false";\n' >"$root/etc/apt/apt.conf.d/99dlock-no-recommends"
		touch "$root/.dlock-ready"
	fi
	if [ -n "$extra" ] && [ ! -f "$root/etc/apt/preferences.d/dlock-$extra" ]; then
		mirror=$(apt_mirror) || return 1
		printf 'deb %s %s main\n' "$mirror" "$extra" >"$root/etc/apt/sources.list.d/dlock-$extra.list"
		printf 'Package: src:postgresql-%s\nPin: release a=%s\nPin-Priority: 990\n' "$major" "$extra" \
			>"$root/etc/apt/preferences.d/dlock-$extra"
	fi
	chroot_mounts "$root"
	# the packages: checked every run, installed when missing
	local want have
	want=$(major_deps "$major" | wc -w)
	# shellcheck disable=SC2046
	have=$(chroot "$root" dpkg-query -W -f='${Status}\n' $(major_deps "$major") 2>/dev/null |
		grep -c 'install ok installed' || true)
	[ "$have" -eq "$want" ] && return 0
	say "installing PostgreSQL $major and the test tools in the $(suite_of_major "$major") chroot"
	# shellcheck disable=SC2046
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		sh -c "apt-get update -qq && apt-get install -y -qq $(major_deps "$major")" \
		>"$root.apt.log" 2>&1 || {
		echo "installing packages in $root failed; the last lines of $root.apt.log:" >&2
		tail -n 20 "$root.apt.log" >&2
		return 1
	}
}
