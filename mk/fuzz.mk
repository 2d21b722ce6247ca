# mk/fuzz.mk — fuzzing (included by the Makefile). Targets are fuzz/fuzz_<name>.c; see fuzz/fuzz.h
# and fuzz/README.md.
#
#   make fuzz [FUZZ_TIME=60] [FUZZ_TARGETS="safetensors npy"] [-j3]
#        build every target with clang -fsanitize=fuzzer,address,undefined into build-fuzz/ and run
#        each for FUZZ_TIME seconds on a copy of its seed corpus fuzz/corpus/<name>/ (plus the
#        regression inputs fuzz/regress/<name>/), with fuzz/<name>.dict when present; print the
#        executions per target. A crash, leak, hang (> 10 s) or allocation over 2 GB fails the run
#        and names the input to keep in fuzz/regress/<name>/. With -jN, N targets run at once
#        (each still FUZZ_TIME seconds of wall time).
#   make fuzz-regress [SAN=1]
#        replay the seed corpus and fuzz/regress/ through the targets built WITHOUT libFuzzer
#        (fuzz/replay.c drives them), with this build's flags: SAN=1 for ASan + UBSan.
#        tests/test_fuzz_regress.c does the same inside `make test` / `make san`.
#   make fuzz-seeds      rewrite the seed corpus with fuzz/make_seeds.c (the library's writers)
#   make fuzz-campaign [FUZZ_HOURS=8 | FUZZ_SECS=1800] [FUZZ_EXECS=10000000] [FUZZ_JOBS=1]
#                      [FUZZ_MERGE=1] [FUZZ_TARGETS="tokenizer tokenize"]
#        a long campaign (tools/fuzz_campaign.sh; not in CI): every target in turn, FUZZ_JOBS at a
#        time (one per core), until FUZZ_EXECS executions or its share of the budget (FUZZ_HOURS
#        shared evenly, else FUZZ_SECS each; default 30 minutes), whichever comes first, on a corpus
#        kept between campaigns in build-fuzz/campaign/corpus/<name>/ (seeded from fuzz/corpus/ and
#        fuzz/regress/). Every crash/leak/timeout/oom input is copied to fuzz/regress/<name>/ as
#        <kind>-<sha1> and reported; the campaign then exits 1. FUZZ_MERGE=1 minimizes the corpus
#        into fuzz/corpus/<name>/ (libFuzzer -merge=1: only inputs that add coverage). Writes a table
#        (executions, exec/s, wall time, cov, ft, corpus, findings) to build-fuzz/campaign/table.md
#        and stdout. It takes FUZZ_JOBS cores for the whole budget: never benchmark meanwhile.
#   make fuzz-campaign-selftest   plant a crash and a leak in throwaway targets and check that a
#        campaign catches, keeps and reports both (build-fuzz/campaign-selftest/; seconds)
#   make fuzz-clean      remove build-fuzz/ but the campaign corpus (build-fuzz/campaign/);
#   make fuzz-campaign-clean      remove that too

FUZZ_TIME    ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_OPT     ?= -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -Wno-pass-failed \
                -fno-sanitize-recover=undefined
FUZZ_NAMES   := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_ARGS    ?= -timeout=10 -rss_limit_mb=2048 -max_len=65536

# The CLI without its main(): main.c compiled again as attn_cli_main, for the cli target.
FUZZ_CLI_OBJS = $(filter-out $(BUILD)/obj/src/cli/main.o,$(CLI_OBJS)) $(BUILD)/obj/fuzz/cli_main.o
FUZZ_REPLAY   = $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay-%)

FUZZ_HOURS   ?=
FUZZ_SECS    ?= 1800
FUZZ_EXECS   ?= 10000000
FUZZ_JOBS    ?= 1
FUZZ_MERGE   ?= 0

.PHONY: fuzz fuzz-build fuzz-bins fuzz-regress fuzz-seeds fuzz-clean fuzz-campaign \
        fuzz-campaign-selftest fuzz-campaign-clean

# The replay programs are part of the test build: tests/test_fuzz_regress.c runs them.
tests: $(FUZZ_REPLAY)

$(BUILD)/obj/fuzz/cli_main.o: src/cli/main.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Dmain=attn_cli_main -c $< -o $@

$(BUILD)/fuzz/replay-%: fuzz/fuzz_%.c fuzz/replay.c fuzz/fuzz.h $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -o $@ $< fuzz/replay.c $(LIBLINK) $(LDFLAGS) $(LDLIBS)

$(BUILD)/fuzz/replay-cli: fuzz/fuzz_cli.c fuzz/replay.c fuzz/fuzz.h $(FUZZ_CLI_OBJS) $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -o $@ $< fuzz/replay.c $(FUZZ_CLI_OBJS) $(LIBLINK) \
	  $(LDFLAGS) $(LDLIBS) $(CLI_LDLIBS)

# The serve target drives src/serve/ (CLI objects), like the cli one.
$(BUILD)/fuzz/replay-serve: fuzz/fuzz_serve.c fuzz/replay.c fuzz/fuzz.h $(FUZZ_CLI_OBJS) $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -o $@ $< fuzz/replay.c $(FUZZ_CLI_OBJS) $(LIBLINK) \
	  $(LDFLAGS) $(LDLIBS) $(CLI_LDLIBS)

$(BUILD)/fuzz/make-seeds: fuzz/make_seeds.c fuzz/fuzz.h $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -o $@ $< $(LIBLINK) $(LDFLAGS) $(LDLIBS)

fuzz-regress: $(FUZZ_REPLAY)
	@for n in $(FUZZ_NAMES); do \
	  $(BUILD)/fuzz/replay-$$n fuzz/corpus/$$n fuzz/regress/$$n || exit 1; \
	done

fuzz-seeds: $(BUILD)/fuzz/make-seeds
	$(BUILD)/fuzz/make-seeds fuzz/corpus

# ---- libFuzzer binaries (always built in $(FUZZ_BUILD) with $(FUZZ_CC)) ----

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIBLINK) $(LDFLAGS) $(LDLIBS)

$(BUILD)/fuzz/fuzz_cli: fuzz/fuzz_cli.c fuzz/fuzz.h $(FUZZ_CLI_OBJS) $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CLI_OBJS) $(LIBLINK) \
	  $(LDFLAGS) $(LDLIBS) $(CLI_LDLIBS)

$(BUILD)/fuzz/fuzz_serve: fuzz/fuzz_serve.c fuzz/fuzz.h $(FUZZ_CLI_OBJS) $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ifuzz $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_CLI_OBJS) $(LIBLINK) \
	  $(LDFLAGS) $(LDLIBS) $(CLI_LDLIBS)

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

fuzz-build:
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) OPT="$(FUZZ_OPT)" \
	  SANLD="-fsanitize=address,undefined" FUZZ_TARGETS="$(FUZZ_TARGETS)" fuzz-bins

# One run per target: a private copy of the corpus, the log, and a one-line summary.
FUZZ_WORK = $(CURDIR)/$(FUZZ_BUILD)/work
fuzz-run-%: fuzz-build
	@w=$(FUZZ_WORK)/$*; rm -rf $$w; mkdir -p $$w/corpus $$w/artifacts; \
	cp fuzz/corpus/$*/* $$w/corpus/ 2>/dev/null; \
	extra=""; [ -d fuzz/regress/$* ] && extra="$(CURDIR)/fuzz/regress/$*"; \
	dict=""; [ -f fuzz/$*.dict ] && dict="-dict=$(CURDIR)/fuzz/$*.dict"; \
	seeds=$$(ls $$w/corpus | wc -l); \
	( cd $$w && ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1} \
	  $(CURDIR)/$(FUZZ_BUILD)/fuzz/fuzz_$* $(FUZZ_ARGS) -max_total_time=$(FUZZ_TIME) \
	  -print_final_stats=1 -artifact_prefix=$$w/artifacts/ $$dict corpus $$extra \
	  > $$w/log 2>&1 ); rc=$$?; \
	runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$w/log | tail -n 1); \
	secs=$$(sed -n 's/^stat::average_exec_per_sec: *//p' $$w/log | tail -n 1); \
	cov=$$(grep -o 'cov: [0-9]*' $$w/log | tail -n 1 | sed 's/cov: //'); \
	now=$$(ls $$w/corpus | wc -l); \
	if [ $$rc -eq 0 ]; then \
	  printf 'fuzz %-12s %10s runs in %ss (%s/s), coverage %s, corpus %s -> %s, no crash\n' \
	    $* "$${runs:-?}" $(FUZZ_TIME) "$${secs:-?}" "$${cov:-?}" $$seeds $$now > $$w/summary; \
	else \
	  a=$$(ls $$w/artifacts 2>/dev/null | head -n 1); \
	  printf 'fuzz %-12s FAILED (exit %s) after %s runs: input %s (keep it in fuzz/regress/%s/), log %s\n' \
	    $* $$rc "$${runs:-?}" "$$w/artifacts/$$a" $* $$w/log > $$w/summary; \
	  grep -m 1 -E 'ERROR|runtime error|fuzz_' $$w/log >> $$w/summary; \
	fi; \
	cat $$w/summary

fuzz: $(FUZZ_TARGETS:%=fuzz-run-%)
	@echo "== fuzz: $(FUZZ_TIME) s per target"
	@cat $(FUZZ_TARGETS:%=$(FUZZ_WORK)/%/summary)
	@! grep -q FAILED $(FUZZ_TARGETS:%=$(FUZZ_WORK)/%/summary)

fuzz-campaign: fuzz-build
	@FUZZ_BUILD="$(FUZZ_BUILD)" FUZZ_TARGETS="$(FUZZ_TARGETS)" FUZZ_HOURS="$(FUZZ_HOURS)" \
	  FUZZ_SECS="$(FUZZ_SECS)" FUZZ_EXECS="$(FUZZ_EXECS)" FUZZ_JOBS="$(FUZZ_JOBS)" \
	  FUZZ_MERGE="$(FUZZ_MERGE)" FUZZ_ARGS="$(FUZZ_ARGS)" bash tools/fuzz_campaign.sh

fuzz-campaign-selftest:
	@FUZZ_CC="$(FUZZ_CC)" FUZZ_BUILD="$(FUZZ_BUILD)" bash tools/fuzz_campaign.sh --selftest

# The campaign corpus (build-fuzz/campaign/) is hours of fuzzing: only fuzz-campaign-clean drops it.
fuzz-clean:
	@mkdir -p $(FUZZ_BUILD)
	find $(FUZZ_BUILD) -mindepth 1 -maxdepth 1 ! -name campaign -exec rm -rf {} +

fuzz-campaign-clean:
	rm -rf $(FUZZ_BUILD)/campaign
