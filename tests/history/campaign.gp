# campaign.gp — throughput and latency of a fault campaign (campaign.py),
# the fault windows shaded. Variables: rates (second ok_ops p50_ms p99_ms),
# faults (start_s end_s kind target), png, title_text.
set terminal pngcairo size 1100,700 font ",10"
set output png
set multiplot layout 2,1 title title_text
set grid
set key top left opaque
set xlabel "seconds"
# One shaded window per fault, labelled with its kind.
n = int(system(sprintf("grep -vc '^#' %s", faults)))
do for [i=0:n-1] {
  s = real(system(sprintf("awk '!/^#/{k++; if (k==%d) print $1}' %s", i+1, faults)))
  e = real(system(sprintf("awk '!/^#/{k++; if (k==%d) print $2}' %s", i+1, faults)))
  k = system(sprintf("awk '!/^#/{k++; if (k==%d) print $3}' %s", i+1, faults))
  c = (k[1:4] eq "kill") ? "#ffb0b0" : "#b0c8ff"
  set object (i+1) rect from s, graph 0 to e, graph 1 behind fc rgb c fs solid 0.5 noborder
  set label (i+1) k at s, graph 0.97 rotate by 90 right font ",7"
}
set ylabel "ok operations / s"
plot rates using 1:2 with steps lw 2 lc rgb "#204080" title "throughput (faults shaded: kill red, pause blue)"
unset label
set ylabel "latency (ms)"
set logscale y
plot rates using 1:3 with steps lw 2 title "p50", \
     rates using 1:4 with steps lw 1 title "p99"
unset multiplot
