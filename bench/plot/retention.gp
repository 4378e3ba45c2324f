# retention.gp — bench_retention's CSV as a PNG: bytes of completion
# records retained over time with acknowledgements vs lease-only
# collection, against the capacity model λ·W·b (rate × lease TTL × 128 B);
# the LevelDB folder's bytes on disk over the same time (the load, then
# the compaction and the drain); and, from the summary CSV, bytes per
# retained record: the model's 128 B, onced's count (key + value), and on
# disk before and after a forced compaction.
#
# Reads the CSV of bench_retention (columns mode,t_s,records,record_bytes,
# disk_bytes,reclaimed_per_s[,phase]; modes "ack" and "lease-only") and,
# when summary is given, its summary CSV (one row per mode; older runs
# without one draw the first two panels only).
# Usage: gnuplot -e "csv='build/retention.csv'; png='build/retention.png'; \
#            summary='build/retention-summary.csv'; rate=1000; ttl=5" \
#            bench/plot/retention.gp
# rate and ttl (seconds) must be the --rate and --ttl of the run: they only
# draw the model line.

if (!exists("csv")) csv = "retention.csv"
if (!exists("png")) png = "retention.png"
if (!exists("summary")) summary = ""
if (!exists("rate")) rate = 1000
if (!exists("ttl")) ttl = 5
if (!exists("b")) b = 128

model = rate * ttl * b
panels = (summary eq "") ? 2 : 3
# Older CSVs have no phase column: no compaction points then.
phased = int(system(sprintf("head -1 '%s' | awk -F, '{print NF}'", csv))) >= 7

set datafile separator ","
set terminal pngcairo size (panels == 3 ? 2000 : 1400),560 font ",10"
set output png
set key top left box opaque
set grid
set xlabel "seconds"
set format y "%.1s %cB"
set yrange [0:*]

set multiplot layout 1,panels title sprintf("Retention of completion records at %g calls/s, lease TTL %g s (model: rate x TTL x %g B = %.0f bytes)", rate, ttl, b, model)

set title "retained record bytes (onced Stats)"
set ylabel "bytes"
set offsets 0, 0, graph 0.3, 0 # room above the model line for the key
plot csv skip 1 using 2:(strcol(1) eq "lease-only" ? $4 : 1/0) \
        with lines lw 2 lc rgb "#1f77b4" title "lease-only collection", \
     csv skip 1 using 2:(strcol(1) eq "ack" ? $4 : 1/0) \
        with lines lw 2 lc rgb "#d62728" title "with acknowledgements", \
     model with lines lw 2 dt 2 lc rgb "#333333" \
        title sprintf("model λ·W·b = %g/s x %g s x %g B", rate, ttl, b)

set title "LevelDB folder on disk (load, then compaction and drain)"
set ylabel "bytes"
set offsets 0, 0, 0, 0
if (!phased) {
plot csv skip 1 using 2:(strcol(1) eq "lease-only" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#1f77b4" title "lease-only collection", \
     csv skip 1 using 2:(strcol(1) eq "ack" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#d62728" title "with acknowledgements"
} else {
plot csv skip 1 using 2:(strcol(1) eq "lease-only" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#1f77b4" title "lease-only collection", \
     csv skip 1 using 2:(strcol(1) eq "ack" ? $5 : 1/0) \
        with lines lw 2 lc rgb "#d62728" title "with acknowledgements", \
     csv skip 1 using 2:(strcol(1) eq "lease-only" && \
                         (strcol(7) eq "compacted" || strcol(7) eq "final") \
                         ? $5 : 1/0) \
        with points pt 7 ps 1.2 lc rgb "#1f77b4" \
        title "right after a compaction", \
     csv skip 1 using 2:(strcol(1) eq "ack" && \
                         (strcol(7) eq "compacted" || strcol(7) eq "final") \
                         ? $5 : 1/0) \
        with points pt 7 ps 1.2 lc rgb "#d62728" notitle
}

if (panels == 3) {
    # Summary columns: 1 mode, 9 end_records, 13 compacted_records,
    # 20 logical, 21 disk before, 22 disk after, 24 marginal table bytes,
    # 25 model.
    set title "bytes per retained record, lease-only, at the end of the load"
    set ylabel "bytes per record (log scale)"
    set xlabel ""
    set logscale y
    set format y "%g"
    set yrange [10:*]
    set style fill solid 0.8 border -1
    set boxwidth 0.6
    unset key
    set xtics ("model" 0, "onced's count" 1, "on disk, before" 2, \
               "on disk, after compaction" 3, "marginal, tables" 4) \
        rotate by -20
    plot summary skip 1 using (0):(strcol(1) eq "lease-only" ? $25 : 1/0) \
            with boxes lc rgb "#777777", \
         summary skip 1 using (1):(strcol(1) eq "lease-only" ? $20 : 1/0) \
            with boxes lc rgb "#2ca02c", \
         summary skip 1 using (2):(strcol(1) eq "lease-only" ? $21 : 1/0) \
            with boxes lc rgb "#ff7f0e", \
         summary skip 1 using (3):(strcol(1) eq "lease-only" ? $22 : 1/0) \
            with boxes lc rgb "#1f77b4", \
         summary skip 1 using (4):(strcol(1) eq "lease-only" ? $24 : 1/0) \
            with boxes lc rgb "#9467bd", \
         summary skip 1 using (0):(strcol(1) eq "lease-only" ? $25 : 1/0): \
            (sprintf("%.0f B", $25)) with labels offset 0,1, \
         summary skip 1 using (1):(strcol(1) eq "lease-only" ? $20 : 1/0): \
            (sprintf("%.0f B", $20)) with labels offset 0,1, \
         summary skip 1 using (2):(strcol(1) eq "lease-only" ? $21 : 1/0): \
            (sprintf("%.0f B", $21)) with labels offset 0,1, \
         summary skip 1 using (3):(strcol(1) eq "lease-only" ? $22 : 1/0): \
            (sprintf("%.0f B", $22)) with labels offset 0,1, \
         summary skip 1 using (4):(strcol(1) eq "lease-only" ? $24 : 1/0): \
            (sprintf("%.0f B", $24)) with labels offset 0,1
}

unset multiplot
