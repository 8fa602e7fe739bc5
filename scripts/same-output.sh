#!/usr/bin/env bash
# same-output: runs two vramscope binaries over every snapshot under the given
# folders and reports whether they print the same thing: analyze --json,
# explain, breakdown (by category at the peak, by callsite at the end, by
# module at the end, by rule at the peak) and the pprof export at the end, the
# peak and the leak. A change that should alter no verdict is checked on the
# GPU machine's fresh recordings this way:
#
#   scripts/same-output.sh OLD_BINARY NEW_BINARY DIR... > same.txt
#
# Prints one line per snapshot and output ("same" or "DIFF", with the first
# lines of the diff), then "N of M same". Exits 1 when any output differs.
set -u

if [ $# -lt 3 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "usage: $0 OLD_BINARY NEW_BINARY DIR..." >&2
	exit 2
fi
old=$1 new=$2
shift 2
tmp=$(mktemp -d /tmp/same-output.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
same=0 all=0

# run BIN SIDE FILE NAME ARGS...: one output of one binary, exit status last.
run() {
	local bin=$1 side=$2 file=$3 name=$4
	shift 4
	case $name in
	pprof-*)
		"$bin" export "$file" --pprof "$tmp/$side.pb.gz" "$@" >/dev/null 2>&1
		echo "exit $?" >"$tmp/$side"
		[ -f "$tmp/$side.pb.gz" ] && gzip -dc "$tmp/$side.pb.gz" >>"$tmp/$side"
		rm -f "$tmp/$side.pb.gz"
		;;
	*)
		"$bin" "$@" "$file" >"$tmp/$side" 2>&1
		echo "exit $?" >>"$tmp/$side"
		;;
	esac
}

while IFS= read -r -d '' f; do
	while read -r name args; do
		# shellcheck disable=SC2086 # args are words on purpose
		run "$old" old "$f" "$name" $args
		# shellcheck disable=SC2086
		run "$new" new "$f" "$name" $args
		all=$((all + 1))
		if cmp -s "$tmp/old" "$tmp/new"; then
			same=$((same + 1))
			echo "same $name $f"
		else
			echo "DIFF $name $f"
			diff "$tmp/old" "$tmp/new" | head -n 8
		fi
	done <<'EOF'
analyze analyze --json
explain explain
breakdown-category breakdown --by category --at peak
breakdown-callsite breakdown --by callsite --at end
breakdown-module breakdown --by module --at end
breakdown-rule breakdown --by rule --at peak
pprof-end --at end
pprof-peak --at peak
pprof-leak --at leak
EOF
done < <(find "$@" -type f \( -name '*.pickle' -o -name '*.pickle.gz' -o -name '*.pickle.zst' \) -print0 | sort -z)

echo "$same of $all same"
[ "$same" -eq "$all" ]
