# calls.gp — bench_calls' CSV as a PNG: calls/s (left) and p50 latency
# (right) against concurrent callers, once beside once_floor (onced's shape
# with nothing in it), with the 1-caller echo baselines as points and issue
# 2's target (12k calls/s at 16 callers) as a mark.
#
# Reads the CSV written by bench_calls --csv (columns kind,callers,calls,
# errors,seconds,calls_per_s,p50_us,p99_us,commits,fsyncs,
# exactly_once_verified).
# Usage: gnuplot -e "csv='build/bench.csv'; png='build/bench.png'" \
#            bench/plot/calls.gp

if (!exists("csv")) csv = "bench.csv"
if (!exists("png")) png = "bench.png"

kinds  = "once floor echo echo+fsync"
labels = "once(onced+libonce) once\\_floor(the-design,nothing-in-it) nng-echo(1-caller) echo+fdatasync(1-caller)"
colors = "#d62728 #7f7f7f #1f77b4 #2ca02c"

# One kind's rows (no header), so each kind is one connected line.
rows(k) = sprintf("< awk -F, '$1 == \"%s\"' '%s'", k, csv)

set datafile separator ","
set terminal pngcairo size 1400,560 font ",10"
set output png
set key top left box opaque
set grid
set logscale x 2
set xlabel "concurrent callers"
set xtics ("1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256)
set offsets graph 0.05, graph 0.05, 0, 0

set multiplot layout 1,2 title "Durable exactly-once increments (bench\\_calls): once beside its design's floor"

set title "throughput"
set ylabel "calls/s"
set yrange [0:*]
set label 1 "issue 2 target" at 16,12000 point pt 2 ps 2 lc rgb "black" offset 1,-1
plot for [i=1:words(kinds)] rows(word(kinds, i)) \
    using 2:6 \
    with linespoints lw 2 pt 7 ps 1.2 lc rgb word(colors, i) \
    title word(labels, i)
unset label 1

set title "p50 latency"
set ylabel "µs"
set logscale y 10
set yrange [*:*]
plot for [i=1:words(kinds)] rows(word(kinds, i)) \
    using 2:7 \
    with linespoints lw 2 pt 7 ps 1.2 lc rgb word(colors, i) \
    title word(labels, i)

unset multiplot
