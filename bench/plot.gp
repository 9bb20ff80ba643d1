# uma_bench's curves as PNGs: allocate+release latency per block size, throughput per number of
# client actors. From the repository root:
#
#   uma_bench --plot-data bench.dat                      # on the GPU machine (or --backend host)
#   gnuplot -e "data='bench.dat'" bench/plot.gp          # writes docs/performance-*.png
#
# Variables (-e "name='value'"): data (default bench.dat), outdir (default docs), title (a
# subtitle, e.g. the GPU and the date). The data file is two gnuplot blocks, each with a
# column-header line: index 0 = bytes, then "<variant> median" and "<variant> p99" columns (us);
# index 1 = clients, then one pairs-per-second column per variant. NaN marks "not measured".

if (!exists("data")) data = 'bench.dat'
if (!exists("outdir")) outdir = 'docs'
if (!exists("title")) title = ''

set terminal pngcairo size 1200,720 noenhanced font ",11"
set datafile missing NaN
set grid xtics ytics mytics
set key outside right top spacing 1.2
set border lw 1.2

# -- allocate+release latency ---------------------------------------------------------------------
stats data index 0 using 1 nooutput
latency_columns = STATS_columns
set xrange [STATS_min / 1.6 : STATS_max * 1.6]
set output outdir.'/performance-alloc.png'
set title 'uma allocate+release latency (solid: median, dashed: p99)'.(title eq '' ? '' : "\n".title)
set logscale xy
set xlabel 'block size'
set ylabel 'microseconds per allocate+release pair'
set format y '%g'
set xtics ('256 B' 256, '1 KiB' 1024, '4 KiB' 4096, '16 KiB' 16384, '64 KiB' 65536, \
           '256 KiB' 262144, '1 MiB' 1048576, '4 MiB' 4194304, '16 MiB' 16777216, \
           '64 MiB' 67108864)
plot for [i=2:latency_columns:2] data index 0 using 1:i with linespoints lw 2 pt 7 ps 0.8 \
       lc (i/2) dt 1 title columnheader(i), \
     for [i=3:latency_columns:2] data index 0 using 1:i with lines lw 1.5 lc ((i-1)/2) dt 2 \
       notitle

# -- throughput ----------------------------------------------------------------------------------
stats data index 1 using 1 nooutput
throughput_columns = STATS_columns
set output outdir.'/performance-throughput.png'
set title 'uma allocate+release throughput, 64 KiB (one request in flight per client)'.(title eq '' ? '' : "\n".title)
set logscale x 2
set logscale y
set xlabel 'clients (actors; raw baselines: threads)'
set ylabel 'allocate+release pairs per second'
set format y '%.0s%c'
set xtics (1, 2, 4, 8, 16)
set xrange [0.8 : 20]
set offsets 0, 0, graph 0.1, graph 0.05
plot for [i=2:throughput_columns] data index 1 using 1:i with linespoints lw 2 pt 7 ps 1 \
       lc (i-1) title columnheader(i), \
     1e6 with lines dt 3 lw 1.5 lc 'gray40' title 'target: 1 M/s (8 clients)'
set output
