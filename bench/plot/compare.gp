# compare.gp — bench_compare's CSV as a PNG: durable exactly-once calls/s
# against concurrent callers, one line per system (left), and p50 (solid)
# and p99 (dashed) latency (right).
#
# Reads the CSV written by bench_compare (columns system,callers,seconds,
# calls,errors,calls_per_s,p50_us,p99_us,exactly_once; rows grouped by
# system, so each system's points are one line).
# Usage: gnuplot -e "csv='build/compare.csv'; png='build/compare.png'" \
#            bench/plot/compare.gp
# bench_compare runs it itself after writing the CSV.

if (!exists("csv")) csv = "compare.csv"
if (!exists("png")) png = "compare.png"
if (!exists("seconds")) seconds = 0

systems = "once redis postgres echo leveldb etcd once-replicated once-shared once-async once-kv once-kv-async once-kv-replicated redis-job postgres-job etcd-job"
labels  = "once(handle-per-caller) redis(AOF-always+Lua) postgres(sync-commit) nng-echo(no-disk) leveldb-sync-put(no-RPC) etcd(3-members,Txn) once-replicated(3+3-etcd) once-shared(N-threads,1-handle) once-async(1-thread,N-in-flight) once-kv(job,handle-per-caller) once-kv-async(job,1-thread) once-kv-replicated(job,3+3-etcd) redis-job(Lua) postgres-job(plpgsql) etcd-job(Txn)"
colors  = "#d62728 #1f77b4 #2ca02c #7f7f7f #9467bd #ff7f0e #8c564b #e377c2 #17becf #b2182b #00cccc #7b3f00 #4393c3 #5aae61 #fdb863"

set datafile separator ","
set terminal pngcairo size 1400,560 font ",10"
set output png
set key top left box opaque
set grid
set logscale x 2
set logscale y 10
set xlabel "concurrent callers"
set xtics ("1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256)
set offsets graph 0.05, graph 0.05, 0, 0

set multiplot layout 1,2 title sprintf("Durable exactly-once increments on one machine (nothing acknowledged before it is on disk)%s", \
    seconds > 0 ? sprintf(", %d s per point", seconds) : "")

set title "throughput"
set ylabel "calls/s"
plot for [i=1:words(systems)] csv skip 1 \
    using 2:(strcol(1) eq word(systems, i) ? $6 : 1/0) \
    with linespoints lw 2 pt 7 lc rgb word(colors, i) \
    title word(labels, i)

set title "latency"
set ylabel "microseconds per call"
set key outside right top box
plot for [i=1:words(systems)] csv skip 1 \
        using 2:(strcol(1) eq word(systems, i) ? $7 : 1/0) \
        with linespoints lw 2 pt 7 lc rgb word(colors, i) \
        title word(systems, i)." p50", \
     for [i=1:words(systems)] csv skip 1 \
        using 2:(strcol(1) eq word(systems, i) ? $8 : 1/0) \
        with linespoints lw 1 dt 2 pt 6 lc rgb word(colors, i) \
        title word(systems, i)." p99"

unset multiplot
