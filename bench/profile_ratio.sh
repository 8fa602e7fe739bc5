#!/usr/bin/env bash
# profile_ratio.sh A.pb.gz B.pb.gz [N]: each function's flat CPU seconds in
# profile A and in B and their ratio B/A, the N (40) largest in B first:
# which functions a slower machine (B) is slower in than its whole run is.
set -eu
flat() {
  go tool pprof -top -nodecount=1000 "$1" 2>/dev/null | awk 'NR > 6 && $1 ~ /s$/ {
    v = $1; ms = v ~ /ms$/; sub(/m?s$/, "", v); if (ms) v /= 1000
    $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print $0 "\t" v }' | sort -t$'\t' -k1,1
}
join -t$'\t' -a1 -a2 -e0 -o 0,1.2,2.2 <(flat "$1") <(flat "$2") |
  awk -F'\t' '{ printf "%8.2f %8.2f %7s  %s\n", $2, $3, ($2 > 0 ? sprintf("%.2f", $3 / $2) : "-"), $1 }' |
  sort -k2,2 -nr | head -n "${3:-40}"
