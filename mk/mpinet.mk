# mk/mpinet.mk — MPI programs outside the library (issue 19: the two-host harness and the
# communication measurements), included by the Makefile. Built only where Open MPI's compiler
# wrapper mpicc is installed (Debian: libopenmpi-dev); they then join `make benches`. Compiled by
# $(CC) (gcc or clang, the same warnings) with the include and link flags mpicc reports.
#   make mpi-check         $(BUILD)/tools/mpi_check: an MPI job's hosts and an all-reduce checked
#                          element by element (tools/netns_2host.sh --selftest runs it)
#   make bench-allreduce   $(BUILD)/bench/bench_allreduce: MPI_Allreduce bandwidth and latency,
#                          4 KiB .. 64 MiB (tools/allreduce_runs.sh runs it on every transport)
#   make netns-selftest    the two "hosts" (network namespaces + veth) running mpi_check; needs
#                          root; exit 77 with the reason when namespaces cannot be made
#   make netns-equality    tools/netns_equality.sh: `attn train` as 2 ranks on the 2 "hosts" =
#                          1 process (losses, weights); needs root and an attn built with MPI
#   make mpi-kill-test     tools/mpi_kill_test.sh: kill a rank of `attn train` mid-run, or fail
#                          the link between the 2 hosts (needs an attn built with MPI)
MPINET_MPICC := $(shell command -v mpicc 2>/dev/null)
.PHONY: mpi-check bench-allreduce netns-selftest netns-equality mpi-kill-test
ifneq ($(MPINET_MPICC),)
MPINET_CFLAGS := $(shell mpicc --showme:compile)
MPINET_LIBS   := $(shell mpicc --showme:link)

$(BUILD)/tools/mpi_check: tools/mpi_check.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(MPINET_CFLAGS) -o $@ $< $(LDFLAGS) $(MPINET_LIBS)

$(BUILD)/bench/bench_allreduce: bench/bench_allreduce.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(MPINET_CFLAGS) -o $@ $< $(LDFLAGS) $(MPINET_LIBS)

benches: $(BUILD)/bench/bench_allreduce $(BUILD)/tools/mpi_check
mpi-check: $(BUILD)/tools/mpi_check
bench-allreduce: $(BUILD)/bench/bench_allreduce
netns-selftest: $(BUILD)/tools/mpi_check
	sh tools/netns_2host.sh --selftest $(BUILD)
netns-equality: $(BUILD)/attn
	sh tools/netns_equality.sh $(BUILD)
mpi-kill-test: $(BUILD)/attn
	sh tools/mpi_kill_test.sh $(BUILD)
else
mpi-check bench-allreduce netns-selftest netns-equality mpi-kill-test:
	@echo "error: no mpicc: install Open MPI (apt-get install libopenmpi-dev openmpi-bin)"; exit 1
endif
