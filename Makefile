# Makefile — the front door: make run, make test.
#
# Owns: the developer and CI entry points (deps, build, run, test, asan,
# bench, format, clean). Builds happen in CMake; this file only sequences.
# Invariant: `make test` is exactly what CI runs first; `make asan` uses its
# own build directory (build-asan) and never touches build/.
# Never: installs system packages except through scripts/deps.sh (make
# install only copies this build into PREFIX).

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
DEB_BUILD  ?= build-deb
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 60
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= 2
DATA       ?= ./data
BENCH_ARGS ?=

.PHONY: all deps build run test asan fuzz tsan valgrind bench deb format clean install campaign

all: build

deps:
	scripts/deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) -j$(JOBS)

run: deps build
	exec $(BUILD)/server/onced --data $(DATA) --dev

test: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Debian packages (CPack, packaging/CMakeLists.txt) in build-deb/: once
# (onced, oncectl, onced.service, /etc/once/onced.conf, man pages),
# libonce0 and libonce-dev (headers, once.pc, find_package(once), .proto),
# python3-once (the `once` Python package).
# Only what the packages hold is built (no tests or benchmarks).
deb: deps
	cmake -S . -B $(DEB_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_INSTALL_PREFIX=/usr -DONCE_SYSTEM_INSTALL=ON \
	    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON
	cmake --build $(DEB_BUILD) -j$(JOBS) --target onced oncectl once man_pages once_python
	cd $(DEB_BUILD) && cpack -G DEB
	@ls -l $(DEB_BUILD)/*.deb

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DONCE_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) \
	    -E 'test_replication|bench_failover_smoke'
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan-replication.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -R 'test_replication|bench_failover_smoke'

# libFuzzer over envelope decoding and dispatch (tests/fuzz_dispatch.c),
# clang + ASan + UBSan in build-fuzz/, FUZZ_SECONDS of fuzzing from the seed
# corpus; findings land in build-fuzz/ as crash-* files.
fuzz:
	scripts/deps.sh fuzz
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DONCE_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_dispatch fuzz_corpus
	rm -rf $(FUZZ_BUILD)/corpus && mkdir -p $(FUZZ_BUILD)/corpus
	$(FUZZ_BUILD)/tests/fuzz_corpus $(FUZZ_BUILD)/corpus
	cd $(FUZZ_BUILD) && ASAN_OPTIONS=detect_leaks=0 \
	    tests/fuzz_dispatch -max_total_time=$(FUZZ_SECONDS) -timeout=20 \
	    -rss_limit_mb=4096 -print_final_stats=1 corpus

# The suite under ThreadSanitizer (build-tsan/); onced children inherit
# TSAN_OPTIONS. tests/tsan.supp explains its suppressions (LevelDB and what it
# calls are not instrumented). test_replication runs here again: the one
# TSan run that stopped (in test_large_entry_split) matches the winner's
# nng_close hang fixed by repl/handover.c (docs/replication.md, known
# issues); since then it passed beside test_crash_matrix and test_soak.
# TSAN_EXCLUDE='regex' leaves suites out (none by default).
TSAN_EXCLUDE ?=

tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DONCE_TSAN=ON
	cmake --build $(TSAN_BUILD) -j$(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	ctest --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS) \
	    $(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')

# The integration tests with every onced they start running under valgrind
# memcheck (tests/harness.c: ONCE_TEST_ONCED_WRAPPER). A memory error or a
# definite leak makes onced exit 99, and the test's teardown (which wants a
# clean exit 0) fails. VALGRIND_EXCLUDE leaves out test_collector, whose
# 8 x 20,000 calls do not fit its time bounds at valgrind's speed (about
# 20x slower here), test_etcd (no onced), and test_replication, whose
# onced replicas are started by tests/cluster.c without the wrapper and
# re-execute themselves on a step-down (which would leave valgrind anyway),
# and whose 2 s etcd lease would lapse between keepalives at valgrind's
# speed (docs/replication.md); both run in `make test` and `make asan`. Every other integration suite
# runs. tests/valgrind.supp names the one leak not counted (inside nng
# 1.5.2, and why).
# Also left out since this session (CI-like clean run, 2026-12-03), for
# time bounds that do not fit valgrind's speed, not for memory errors (none
# was reported; the same suites pass under ASan and TSan): test_conns (an
# onced limited to 256 files, of which valgrind takes its own, and idle
# timings), test_outbox (its long-poll waits), test_preauth and
# test_slow_peer (flood bounds scaled from one request alone);
# test_py_billing (its receiver must bill within bounded waits between a
# dozen kills, and the whole test within 120 s).
# test_repl_crash_matrix (2026-12-04) as test_replication: its replicas are
# started by tests/cluster.c without the wrapper, so under valgrind it would
# only run again what `make test` ran.
# test_py_tls (2026-12-04) for what valgrind counts, not for an error of
# onced's: its hundreds of reset handshakes stop nng 1.5.2's tls+tcp://
# listener (as they should; the watch listens again), and the TLS
# connections that listener had taken and never handed over are then
# reported definitely lost, allocated on nng's threads with no frame of
# onced to suppress them by (tests/valgrind.supp suppresses the listener
# itself). It runs in `make test`; test_tls runs under valgrind.
# One suite at a time (VALGRIND_JOBS): two suites side by side, each onced
# under memcheck, left raw calls of test_leases, test_crash_matrix and
# test_tls_errors without an answer within their bounds in a CI-like clean
# run (2026-12-03: a connection closed, a 5 s call timed out, a TLS
# handshake outlasting oncectl's attempts).
VALGRIND_JOBS    ?= 1
VALGRIND_EXCLUDE ?= test_collector|test_replication|test_repl_crash_matrix|test_etcd|test_conns|test_outbox|test_preauth|test_slow_peer|test_py_billing|test_py_tls
VALGRIND_CMD     ?= /usr/bin/valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
                    --suppressions=$(CURDIR)/tests/valgrind.supp

valgrind: deps build
	scripts/deps.sh valgrind
	ONCE_TEST_ONCED_WRAPPER="$(VALGRIND_CMD)" \
	ctest --test-dir $(BUILD) --output-on-failure -j$(VALGRIND_JOBS) \
	    -L integration -E '$(VALGRIND_EXCLUDE)'

bench: deps build
	$(BUILD)/bench/bench_calls --csv $(BUILD)/bench.csv $(BENCH_ARGS)

# install: libonce, headers, oncectl, onced and the Python package (into
# Debian's dist-packages layout: /usr/local/lib/python3.X/dist-packages by
# default; PREFIX=/usr gives /usr/lib/python3/dist-packages). PREFIX and
# DESTDIR as usual.
PREFIX ?=

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

# bench-python: the Python client beside the C client (bench_calls) at 1
# and 16 callers in one run, and their ratio (docs/python.md).
PYBENCH_ARGS ?= --seconds 5 --rounds 3

.PHONY: bench-python

bench-python: deps build
	/usr/bin/python3 bench/bench_python.py --build $(BUILD) \
	    --csv $(BUILD)/bench-python.csv $(PYBENCH_ARGS)

format:
	find . \( -path ./$(BUILD) -o -path ./$(ASAN_BUILD) -o -path './build*' \
	    -o -path ./.git -o -path ./data \) -prune -o \
	    \( -name '*.c' -o -name '*.h' \) -type f -print | xargs -r clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD) $(DEB_BUILD)

# compare: once beside Redis and PostgreSQL (and the nng echo and LevelDB
# limits) in one run: build/compare.csv, build/compare.png. Installs the
# benchmarks' own packages first (scripts/bench-deps.sh, never run by test).
# plots: PNGs from the benchmarks' CSVs; measures retention first when
# build/retention.csv is missing (delete it to measure again; its summary,
# build/retention-summary.csv, draws the bytes-per-record panel), and
# build/compare.png and build/bench.png when their CSVs are there.
COMPARE_ARGS      ?=
RETENTION_RATE    ?= 1000
RETENTION_TTL     ?= 5
RETENTION_SECONDS ?= 20

.PHONY: compare plots

compare: deps
	scripts/bench-deps.sh
	$(MAKE) build
	$(BUILD)/bench/bench_compare --csv $(BUILD)/compare.csv \
	    --png $(BUILD)/compare.png $(COMPARE_ARGS)

plots: deps
	scripts/bench-deps.sh
	$(MAKE) build
	test -f $(BUILD)/retention.csv || $(BUILD)/bench/bench_retention \
	    --rate $(RETENTION_RATE) --ttl $(RETENTION_TTL)s \
	    --seconds $(RETENTION_SECONDS) --csv $(BUILD)/retention.csv
	S=$(BUILD)/retention-summary.csv; test -f $$S || S=; \
	gnuplot -e "csv='$(BUILD)/retention.csv'; png='$(BUILD)/retention.png'; \
	    summary='$$S'; rate=$(RETENTION_RATE); ttl=$(RETENTION_TTL)" \
	    bench/plot/retention.gp
	@echo "plot in $(BUILD)/retention.png"
	if [ -f $(BUILD)/compare.csv ]; then \
	    gnuplot -e "csv='$(BUILD)/compare.csv'; png='$(BUILD)/compare.png'" \
	        bench/plot/compare.gp && echo "plot in $(BUILD)/compare.png"; fi
	if [ -f $(BUILD)/bench.csv ]; then \
	    gnuplot -e "csv='$(BUILD)/bench.csv'; png='$(BUILD)/bench.png'" \
	        bench/plot/calls.gp && echo "plot in $(BUILD)/bench.png"; fi

# retransmit: effects per logical call when replies are lost at rate p
# (through bench/once_proxy), same rpc id vs a new id per retry, against
# the model 1/(1-p): build/retransmit.csv, build/retransmit.png.
RETRANSMIT_ARGS ?=

.PHONY: retransmit

retransmit: deps
	$(MAKE) build
	$(BUILD)/bench/bench_retransmit --csv $(BUILD)/retransmit.csv \
	    --png $(BUILD)/retransmit.png $(RETRANSMIT_ARGS)

# campaign: a fault campaign (tests/history/campaign.py): 3 etcd members, 3
# onced_test replicas, clients recording a history while a seeded schedule
# of faults plays (NEMESES: all, none, partition, or a comma list of
# kill-leader, stop-leader, kill-replica, stop-replica, kill-etcd-leader,
# stop-etcd-leader, kill-etcd, stop-etcd, kill-etcd-quorum,
# stop-etcd-quorum, part-leader-etcd, part-replica-etcd,
# part-leader-clients, part-replica-clients, part-etcd-leader, part-etcd,
# loss-leader-clients, delay-leader-clients, loss-leader-etcd,
# delay-leader-etcd, disk-full-follower, clock-jump-leader; partitions run
# every process in a network namespace of its own, tests/history/netns.py,
# and need root, as does disk-full-follower), then the checker
# (tests/history/check.py). Report, history and plot in
# build/campaign/seed-SEED/; exits 0 only on the verdict "valid".
# OVERLAP=N plays N nemesis threads whose faults may come at once (the
# signal and partition kinds; tests/history/overlap.py).
SEED     ?= 1
DURATION ?= 60
NEMESES  ?= all
OVERLAP  ?= 1

campaign: deps build
	/usr/bin/python3 tests/history/campaign.py --build $(BUILD) \
	    --seed $(SEED) --duration $(DURATION) --nemeses $(NEMESES) \
	    --overlap $(OVERLAP)
	@echo "report in $(BUILD)/campaign/seed-$(SEED)/report.txt, plot plot.png"
