# retention.gp — bench_retention's CSV as a PNG: bytes of completion
# records retained over time with acknowledgements vs lease-only
# collection, against the seed's model λ·W·b (rate × lease TTL × 128 B);
# and the LevelDB folder's bytes on disk over the same time.
#
# Reads the CSV of bench_retention (columns mode,t_s,records,record_bytes,
# disk_bytes,reclaimed_per_s; modes "ack" and "lease-only").
# Usage: gnuplot -e "csv='build/retention.csv'; png='build/retention.png'; \
#            rate=1000; ttl=5" bench/plot/retention.gp
# rate and ttl (seconds) must be the --rate and --ttl of the run: they only
# draw the model line.

if (!exists("csv")) csv = "retention.csv"
if (!exists("png")) png = "retention.png"
if (!exists("rate")) rate = 1000
if (!exists("ttl")) ttl = 5
if (!exists("b")) b = 128

model = rate * ttl * b

set datafile separator ","
set terminal pngcairo size 1400,560 font ",10"
set output png
set key top left box opaque
set grid
set xlabel "seconds"
set format y "%.1s %cB"
set yrange [0:*]

set multiplot layout 1,2 title sprintf("Retention of completion records at %g calls/s, lease TTL %g s (model: rate x TTL x %g B = %.0f bytes)", rate, ttl, b, model)

set title "retained record bytes (onced Stats)"
set ylabel "bytes"
set offsets 0, 0, graph 0.3, 0 # room above the model line for the key
plot csv skip 1 using 2:(strcol(1) eq "lease-only" ? $4 : 1/0) \
        with lines lw 2 lc rgb "#1f77b4" title "lease-only collection", \
     csv skip 1 using 2:(strcol(1) eq "ack" ? $4 : 1/0) \
        with lines lw 2 lc rgb "#d62728" title "with acknowledgements", \
     model with lines lw 2 dt 2 lc rgb "#333333" \
        title sprintf("model λ·W·b = %g/s x %g s x %g B", rate, ttl, b)

set title "LevelDB folder on disk (log + tables, before compaction)"
set ylabel "bytes"
set offsets 0, 0, 0, 0
plot csv skip 1 using 2:(strcol(1) eq "lease-only" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#1f77b4" title "lease-only collection", \
     csv skip 1 using 2:(strcol(1) eq "ack" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#d62728" title "with acknowledgements"

unset multiplot
