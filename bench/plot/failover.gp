# failover.gp — bench_failover's CSV as a PNG: the distribution (CDF) of
# the unavailability each client saw per fault, one line per TTL and fault
# kind (kill dark, stop light), with 1.5 x TTL marked per TTL.
#
# Reads the CSV written by bench_failover (columns ttl_s,kind,fault,victim,
# client,unavail_ms).
# Usage: gnuplot -e "csv='failover.csv'; png='failover.png'" \
#            bench/plot/failover.gp
# bench_failover --png runs it itself after writing the CSV.

if (!exists("csv")) csv = "failover.csv"
if (!exists("png")) png = "failover.png"

set datafile separator ","
set terminal pngcairo size 1000,560 font ",10"
set output png
set key bottom right box opaque
set grid
set xlabel "unavailability a client saw per fault (s): last OK call before it to first OK call after it"
set ylabel "fraction of (fault, client) samples"
set yrange [0:1.02]
set xrange [0:*]
set title "Failover time: leader SIGKILLed (restarted) or SIGSTOPped (continued), 3 onced --replicate on 3 etcd members"

ttls = system(sprintf("tail -n +2 '%s' | cut -d, -f1 | sort -n -u | tr '\\n' ' '", csv))
kinds = "kill stop"
# Per TTL a pair: kill (dark), stop (light).
colors = "#08519c #6baed6 #a50f15 #fb6a4a #006d2c #74c476 #54278f #9e9ac8"

# Per (ttl, kind): the samples sorted, plotted against rank / count.
cdf(t, k) = sprintf("< awk -F, 'NR > 1 && $1 == %s && $2 == \"%s\" {print $6 / 1000}' '%s' | sort -g | awk '{v[NR] = $1} END {for (i = 1; i <= NR; i++) print v[i] \",\" i / NR}'", t, k, csv)
count(t, k) = int(system(sprintf("awk -F, 'NR > 1 && $1 == %s && $2 == \"%s\"' '%s' | wc -l", t, k, csv)))

do for [i=1:words(ttls)] {
    set arrow i from first 1.5 * word(ttls, i), graph 0 to first 1.5 * word(ttls, i), graph 1 \
        nohead dt 3 lw 1.5 lc rgb word(colors, 2 * i - 1)
}
# A (ttl, kind) with no samples plots nothing (gnuplot warns, no error).
plot for [i=1:words(ttls)] for [j=1:2] cdf(word(ttls, i), word(kinds, j)) \
    using 1:2 with steps lw 2 dt j lc rgb word(colors, 2 * (i - 1) + j) \
    title sprintf("TTL %s s, %s (n=%d)", word(ttls, i), word(kinds, j), count(word(ttls, i), word(kinds, j))), \
    NaN with lines dt 3 lc rgb "#555555" title "1.5 x TTL (goal for p99)"
