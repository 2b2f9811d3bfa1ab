# Sluice: one non-recursive Makefile. Output goes under $(BUILD).
#   make            build everything
#   make check      unit + integration tests
#   make lint       fast (< 30 s, CI runs it before check): every #include checked against
#                   the module table below (MODS, DEPS_m; `make print-deps` prints it),
#                   clang-format on the lines changed since LINT_BASE (default HEAD~1),
#                   and a report (never a failure) of files over 800 lines and functions
#                   over 100 (scripts/lint)
#   make asan       the same suite under ASan+UBSan (build-asan/)
#   make demo       dispatcher + workers on loopback, a job, its throughput
#   V=1             show full commands

# Compile on every core unless the caller chose -j: CI runs a plain `make check`,
# which compiled the tree (twice, with build-asan/) on one core of two.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
MAKEFLAGS += -j$(shell nproc)
endif

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build-asan
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT ?= -O1 -g
else
BUILD ?= build
SAN_FLAGS :=
OPT ?= -O2 -g
endif

# pkg-config packages each module links (a module not named: none). A
# program links those of its modules' closure only (pkg_libs below); PKGS,
# every one of them, gives the compile flags and libsluice's.
PKGS_sample := libzstd
PKGS_text := libpcre2-8
PKGS_spec := jansson
PKGS_image := libturbojpeg libjpeg libpng libwebp
PKGS_plugin := jansson
PKGS_data := jansson
PKGS_remote := libcurl
PKGS_rpc := grpc gpr libprotobuf-c
PKGS_proto := libprotobuf-c
PKGS_http := libevent libevent_pthreads
PKGS_disp := jansson
PKGS_worker := jansson
PKGS_client := jansson
PKGS := grpc gpr libprotobuf-c libevent libevent_pthreads jansson libturbojpeg libjpeg libzstd \
        libpng libpcre2-8 libwebp libcurl
# Headers only: common/video loads FFmpeg's libraries on first use
# (common/video/video_dl.h), so nothing links them.
PKGS_HEADERS_ONLY := libavformat libavcodec libswscale libavutil
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(PKGS_HEADERS_ONLY) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

CC ?= cc
CFLAGS := -std=gnu11 $(OPT) -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
          -D_GNU_SOURCE -fPIC -pthread $(SAN_FLAGS) -I. -I$(BUILD)/gen $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SAN_FLAGS) $(EXTRA_LDFLAGS)
LDLIBS := $(PKG_LIBS) -lm

ifeq ($(V),1)
Q :=
else
Q := @
endif

PROTOS := $(wildcard proto/*.proto)
GEN_C := $(patsubst proto/%.proto,$(BUILD)/gen/proto/%.pb-c.c,$(PROTOS))
GEN_H := $(GEN_C:.c=.h)

COMMON_SRC := $(wildcard common/*/*.c)
COMMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRC)) $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_C))
COMMON_LIB := $(BUILD)/lib/libsluice_common.a

CLIENT_LIB_SRC := $(wildcard client/lib/*.c)
CLIENT_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLIENT_LIB_SRC))
CLIENT_LIB := $(BUILD)/lib/libsluice.a
CLIENT_SO := $(BUILD)/lib/libsluice.so
CLI_SRC := $(wildcard client/cli/*.c)
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))

DISP_SRC := $(wildcard dispatcher/*.c dispatcher/*/*.c)
DISP_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(DISP_SRC))
WORKER_SRC := $(wildcard worker/*.c)
WORKER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(WORKER_SRC))

BINS := $(BUILD)/bin/sluice
ifneq ($(DISP_SRC),)
BINS += $(BUILD)/bin/sluice-dispatcher
endif
ifneq ($(WORKER_SRC),)
BINS += $(BUILD)/bin/sluice-worker
endif

PLUGINS := $(patsubst examples/plugins/%.c,$(BUILD)/plugins/%.so,$(wildcard examples/plugins/*.c)) \
           $(patsubst tests/plugins/%.c,$(BUILD)/test-plugins/%.so,$(wildcard tests/plugins/*.c))

TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_HELPER_SRC := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TEST_HELPER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_HELPER_SRC))
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BINS := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

# Manual pages: each program writes its own from the option tables it parses
# with (common/base/conf_man.h), so they cannot drift from the flags.
MAN_PAGES := $(patsubst $(BUILD)/bin/%,$(BUILD)/man/%.1,$(BINS))

.SECONDARY:
.PHONY: all check unit integration asan demo deps bench bench-quick fuzz soak clean install \
        uninstall test-systemd deb test-systemd-deb lint print-deps
all: $(BINS) $(BUILD)/bin/sluice-plugin-host $(PLUGINS) $(CLIENT_SO) $(TEST_BINS) $(TOOL_BINS) $(MAN_PAGES)

$(BUILD)/man/%.1: $(BUILD)/bin/%
	@mkdir -p $(dir $@)
	@echo "  MAN     $@"
	$(Q)$< --help-man >$@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }

# Generated protobuf code must exist before anything includes it.
$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(dir $@)
	@echo "  PROTOC  $<"
	$(Q)protoc-c --c_out=$(BUILD)/gen $<

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -Wno-shadow -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -MMD -MP -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# Self-contained (common/ objects included) so that an installed libsluice.a
# links with `pkg-config --static --libs sluice` alone.
$(CLIENT_LIB): $(CLIENT_LIB_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# Exports only the sluice_* API (client/lib/libsluice.map); soname libsluice.so.0.
$(CLIENT_SO): $(CLIENT_LIB_OBJ) $(COMMON_OBJ) client/lib/libsluice.map
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,libsluice.so.$(SO_MAJOR) \
	  -Wl,--version-script=client/lib/libsluice.map -o $@ $(CLIENT_LIB_OBJ) $(COMMON_OBJ) $(LDLIBS)

$(BUILD)/bin/sluice: $(CLI_OBJ) $(CLIENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Plugins run in a process of their own (common/plugin/plugin.h). The
# example plugins and the tests' misbehaving one build into $(BUILD)/plugins.
# The examples as a user builds them (docs/plugins.md): against
# sluice_plugin.h alone, no library (their params through its helpers).
$(BUILD)/plugins/%.so: examples/plugins/%.c common/plugin/sluice_plugin.h
	@mkdir -p $(dir $@)
	@echo "  PLUGIN  $@"
	$(Q)$(CC) $(OPT) $(SAN_FLAGS) -Wall -Wextra -Werror -fPIC -shared -I common/plugin -o $@ $<
$(BUILD)/test-plugins/%.so: tests/plugins/%.c common/plugin/sluice_plugin.h
	@mkdir -p $(dir $@)
	@echo "  PLUGIN  $@"
	$(Q)$(CC) $(CFLAGS) -shared -o $@ $< $(shell pkg-config --libs jansson)

$(BUILD)/bin/sluice-plugin-host: $(BUILD)/obj/plugin_host/main.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -ldl

# Unit tests link only the modules they test (and what those modules are
# declared to need), so a module that starts calling into one it does not
# declare fails its tests' link instead of growing a hidden dependency.
# One static library per module; DEPS_m is m's whole closure.
COMMON_MODS := base sample text spec order image plugin data engine cost profile rpc http video remote pcache
MODS := $(COMMON_MODS) proto disp worker client fx
define mod_lib
LIB_$(1) := $$(BUILD)/lib/mod/libsl_$(1).a
$$(LIB_$(1)): $$(MOBJ_$(1))
	@mkdir -p $$(dir $$@)
	@echo "  AR      $$@"
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(COMMON_MODS),\
  $(eval MOBJ_$(m) := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard common/$(m)/*.c))))
MOBJ_proto := $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_C))
MOBJ_disp := $(filter-out %/main.o,$(DISP_OBJ))
MOBJ_worker := $(filter-out %/main.o,$(WORKER_OBJ))
MOBJ_client := $(CLIENT_LIB_OBJ)
MOBJ_fx := $(TEST_HELPER_OBJ)
$(foreach m,$(MODS),$(eval $(call mod_lib,$(m))))

DEPS_base := base
DEPS_sample := sample base
DEPS_text := text base
DEPS_spec := spec base
DEPS_order := order $(DEPS_spec)
DEPS_image := image $(DEPS_sample)
DEPS_plugin := plugin $(DEPS_image)
DEPS_remote := remote base
DEPS_pcache := pcache spec $(DEPS_sample) $(DEPS_remote)
DEPS_data := data spec $(DEPS_image) $(DEPS_remote)
DEPS_video := video $(DEPS_sample)
DEPS_engine := engine order text plugin $(DEPS_video) $(DEPS_data) $(DEPS_pcache)
DEPS_cost := cost base
DEPS_profile := profile $(DEPS_cost) $(DEPS_engine)
DEPS_rpc := rpc proto base
DEPS_http := http base
# The dispatcher plans from a spec's unit layout (common/spec/spec_layout.h)
# and runs no stage: no decoder, tokenizer or source is in its closure.
DEPS_disp := disp $(DEPS_cost) $(DEPS_order) $(DEPS_rpc) $(DEPS_http)
DEPS_worker := worker $(DEPS_profile) $(DEPS_rpc) $(DEPS_http)
DEPS_client := client $(DEPS_profile) $(DEPS_rpc)

# The daemons link their own objects, the module libraries of their closure
# and only the pkg-config libraries those modules name (ldd shows which).
mod_libs = $(foreach m,$(sort $(1)),$(LIB_$(m)))
pkg_libs = $(shell pkg-config --libs $(sort $(foreach m,$(1),$(PKGS_$(m)))) 2>/dev/null) -lm
DISP_LIBS := $(call mod_libs,$(filter-out disp,$(DEPS_disp)))
DISP_LDLIBS := $(call pkg_libs,$(DEPS_disp))
WORKER_LIBS := $(call mod_libs,$(filter-out worker,$(DEPS_worker)))
WORKER_LDLIBS := $(call pkg_libs,$(DEPS_worker))

$(BUILD)/bin/sluice-dispatcher: $(DISP_OBJ) $(DISP_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(DISP_OBJ) -Wl,--start-group $(DISP_LIBS) -Wl,--end-group \
	  $(DISP_LDLIBS)

$(BUILD)/bin/sluice-worker: $(WORKER_OBJ) $(WORKER_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(WORKER_OBJ) -Wl,--start-group $(WORKER_LIBS) -Wl,--end-group \
	  $(WORKER_LDLIBS)

# What each suite tests (default: everything, for a suite not listed yet).
TEST_MODS_test_base := base
TEST_MODS_test_metrics := base
TEST_MODS_test_rng := base
TEST_MODS_test_sdnotify := base
TEST_MODS_test_spec := spec
TEST_MODS_test_spec_mix := spec
TEST_MODS_test_spec_prefix := spec
TEST_MODS_test_imgops := image
TEST_MODS_test_augment := engine
TEST_MODS_test_codec := sample
TEST_MODS_test_record := sample
TEST_MODS_test_tokenizer := text
TEST_MODS_test_imgops_normalize := image
TEST_MODS_test_simd_paths := image
TEST_MODS_test_jpeg := image
TEST_MODS_test_png := image
TEST_MODS_test_webp := image
TEST_MODS_test_tiles := image
TEST_MODS_test_source := data
TEST_MODS_test_remote := remote
TEST_MODS_test_partial := remote
TEST_MODS_test_partial_claim := remote
TEST_MODS_test_pcache := pcache
TEST_MODS_test_pclaim := pcache
TEST_MODS_test_source_mix := data order
TEST_MODS_test_source_folder := data
TEST_MODS_test_source_records := data
TEST_MODS_test_batcher := engine
TEST_MODS_test_bigbuf := engine
TEST_MODS_test_pool := engine
TEST_MODS_test_pipeline := engine
TEST_MODS_test_pipeline_record := engine
TEST_MODS_test_video := profile
TEST_MODS_test_ranks := engine
TEST_MODS_test_resume := client
TEST_MODS_test_plugin := engine
TEST_MODS_test_plugin_params := plugin
TEST_MODS_test_balance := order
TEST_MODS_test_pack := order
TEST_MODS_test_blend := order
TEST_MODS_test_costmodel := profile
TEST_MODS_test_rpc := rpc
TEST_MODS_test_rpc_limits := rpc
TEST_MODS_test_limits := disp
TEST_MODS_test_conf := disp worker
TEST_MODS_test_conf_man := base
TEST_MODS_test_journal := disp
TEST_MODS_test_journal_state := disp
TEST_MODS_test_dispatcher_balance := disp
TEST_MODS_test_dispatcher_epochs := disp
TEST_MODS_test_dispatcher_jobs := disp
TEST_MODS_test_dispatcher_svc := disp
TEST_MODS_test_dispatcher_back := disp
TEST_MODS_test_dispatcher_received := disp
TEST_MODS_test_dispatcher_splits := disp
TEST_MODS_test_dispatcher_locality := disp
TEST_MODS_test_dispatcher_status := disp
TEST_MODS_test_dispatcher_status_jobs := disp
TEST_MODS_test_planner := disp client
TEST_MODS_test_planner_service := disp client
TEST_MODS_test_planner_fastflow := disp
TEST_MODS_test_planner_replan := disp client
TEST_MODS_test_planner_priors := disp client
TEST_MODS_test_planner_machines := disp
TEST_MODS_test_planner_cache := disp
TEST_MODS_test_planner_cache_cost := disp
TEST_MODS_test_planner_mix := disp
TEST_MODS_test_planner_read := disp
TEST_MODS_test_whatif_ingress := disp
TEST_MODS_test_worker_msg := worker
TEST_MODS_test_worker_rpc := worker
TEST_MODS_test_worker_tasks := worker
TEST_MODS_test_worker_revive := worker
TEST_MODS_test_client_control := client
TEST_MODS_test_client_budget := client
TEST_MODS_test_client_overhead := client
TEST_MODS_test_client_short_job := client
TEST_MODS_test_client_window := client
TEST_MODS_test_client_probe := client
TEST_MODS_test_client_feed := client
TEST_MODS_test_client_diagnose := client
TEST_MODS_test_client_costs := client
TEST_MODS_test_client_line := client
TEST_MODS_test_client_open := client
TEST_MODS_test_url_pins := client
TEST_MODS_test_client_prefetch := client
TEST_MODS_test_client_splits := client
TEST_MODS_test_client_steps := client
TEST_MODS_test_client_ahead := client
TEST_MODS_test_client_pace := client
TEST_MODS_test_pb_wire := client
TEST_MODS_test_rx := client
TEST_MODS_test_compressed_samples := worker client
TEST_MODS_test_sha256 := base
TEST_MODS_test_jobcap := base
TEST_MODS_test_tenants := base
TEST_MODS_test_dispatcher_caps := disp
TEST_MODS_test_fuzz_regressions := disp worker client
test_libs = $(foreach m,$(sort fx $(foreach t,$(or $(TEST_MODS_$(1)),disp worker client),\
              $(DEPS_$(t)))),$(LIB_$(m)))

.SECONDEXPANSION:
$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $$(call test_libs,test_$$*)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< -Wl,--start-group $(call test_libs,test_$*) -Wl,--end-group \
	  $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(CLIENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# install-deps.sh only touches apt when a package is missing (dpkg-query first).
deps:
	@./scripts/install-deps.sh

# Re-invoke make after deps so pkg-config flags are evaluated with packages present.
# The unit suites run a second time under ASan+UBSan (build-asan/): it fits the
# time budget, so sanitizer findings fail `make check` itself. `make asan` also
# runs the integration tests against sanitized daemons.
check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./tests/run-unit.sh $(TEST_BINS)
	$(Q)BUILD=$(BUILD) ./tests/run-integration.sh
ifneq ($(SANITIZE),1)
	@echo "== unit suites under AddressSanitizer + UndefinedBehaviorSanitizer"
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 unit
endif

# The programs that are not module libraries, for lint: what each may include.
# The CLI sees the library through client/lib's headers (sluice.h, stats.h,
# diagnose.h, plan_job.h, status_rpc.h) and of common/ only base, spec (the
# --offload grammar) and rpc (the connection flags): nothing that runs a
# pipeline or reads a source.
DEPS_cli := cli client spec rpc base cost
DEPS_plugin_host := plugin_host $(DEPS_plugin)
LINT_PROGS := cli plugin_host
LINT_DIRS_cli := client/cli
LINT_DIRS_plugin_host := plugin_host
# A module's directories: where its sources are (generated proto/ as it is
# included, without $(BUILD)/gen/), or common/<m> for a module of headers only.
lint_dirs = $(or $(LINT_DIRS_$(1)),$(sort $(patsubst gen/%,%,$(patsubst $(BUILD)/obj/%/,%,\
              $(dir $(MOBJ_$(1)))))),$(wildcard common/$(1)))

# One line per module: `mod M dirs D... deps X...` (scripts/lint reads it).
print-deps:
	@$(foreach m,$(MODS) $(LINT_PROGS),\
	  echo 'mod $(m) dirs $(call lint_dirs,$(m)) deps $(DEPS_$(m))';)

lint: deps
	$(Q)BUILD=$(BUILD) ./scripts/lint

unit: all
	$(Q)BUILD=$(BUILD) ./tests/run-unit.sh $(TEST_BINS)

integration: all
	$(Q)BUILD=$(BUILD) ./tests/run-integration.sh

asan: deps
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 check

# soak: 8 jobs, W1 and W2 killed in turn (W3 watched), one dispatcher restart; SOAK_SECONDS (600).
soak: all
	$(Q)BUILD=$(BUILD) ./scripts/soak

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./scripts/demo.sh

# bench: the local-engine comparison, then the cluster benchmarks (scripts/bench-cluster:
# every scenario x policy on scripts/cluster-emu, ~20 min, needs root; rewrites the
# "Cluster benchmarks (make bench)" section of docs/benchmarks.md and docs/img/*.png),
# then the multimodal pipeline local vs offloaded (scripts/bench-multimodal, ~10 min,
# needs root; prints its tables, docs untouched).
# bench-quick: scenario A, off and auto, ~25 s, docs untouched (tests/integration/
# test_bench_quick.sh runs it in make check).
bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./scripts/bench-local
	$(Q)BUILD=$(BUILD) ./scripts/bench-cluster
	$(Q)BUILD=$(BUILD) ./scripts/bench-multimodal
	$(Q)BUILD=$(BUILD) ./scripts/bench-workers-wanted

bench-quick: all
	$(Q)BUILD=$(BUILD) ./scripts/bench-cluster --quick

# Fuzzing (tests/fuzz/): libFuzzer targets built by clang into build-fuzz/ by a
# second make with BUILD=build-fuzz (the gcc build is untouched), then each run
# for FUZZ_SECONDS on its seed corpus by tests/fuzz/run.sh; fails on any crash.
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
.PHONY: fuzz-build fuzz-clean
fuzz: deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" EXTRA_LDFLAGS="$(FUZZ_SAN)" fuzz-build
	$(Q)BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) ./tests/fuzz/run.sh $(FUZZ_TARGETS)

fuzz-build: $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))

$(BUILD)/obj/tests/fuzz/%.o: CFLAGS += -DSL_LIBFUZZER
# Of the worker only its config table (fuzz_conf); the rest has no target yet.
FUZZ_LINK := $(TEST_HELPER_OBJ) $(MOBJ_disp) $(BUILD)/obj/worker/config.o $(CLIENT_LIB) \
             $(COMMON_LIB)
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LINK)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< -Wl,--start-group $(FUZZ_LINK) \
	  -Wl,--end-group $(CHECK_LIBS) $(LDLIBS)

clean: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_BUILD)

# ---- install / uninstall (docs/deploy.md "Deploying on a cluster")
# PREFIX and DESTDIR as usual. Config files go to SYSCONFDIR/sluice only when
# absent (an admin's edits survive a reinstall) and are removed by uninstall
# only when unchanged. Units and manual pages get BINDIR, SYSCONFDIR and DOCDIR
# substituted.
VERSION := $(shell sed -n 's/^\#define SL_VERSION "\(.*\)"/\1/p' common/base/version.h)
SO_MAJOR := 0
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
DOCDIR ?= $(DATADIR)/doc/sluice
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANDIR ?= $(DATADIR)/man
# Debian's python3 looks in /usr/lib/python3/dist-packages and, for /usr/local,
# in /usr/local/lib/python3.X/dist-packages (evaluated only when installing).
PYVER = $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3,$(PREFIX)/lib/python$(PYVER))$\
              /dist-packages
UNITS := $(wildcard systemd/*.service)
CONFS := $(wildcard conf/*.conf)
EXAMPLES := $(wildcard conf/*.json)
PY_SRC := $(wildcard client/python/sluice/*.py)
INSTALL ?= install
SO_FILE := libsluice.so.$(VERSION)
# Units and manual pages name installed paths: the defaults become these.
PATH_SED = -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/etc/sluice/|$(SYSCONFDIR)/sluice/|g' \
           -e 's|/usr/local/share/doc/sluice/|$(DOCDIR)/|g'

install: $(BINS) $(BUILD)/bin/sluice-plugin-host $(PLUGINS) $(CLIENT_SO) $(CLIENT_LIB) $(MAN_PAGES)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/sluice $(DESTDIR)$(DATADIR)/sluice/examples \
	  $(DESTDIR)$(DOCDIR) $(DESTDIR)$(PYTHONDIR)/sluice $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 755 $(BINS) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 755 $(CLIENT_SO) $(DESTDIR)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/libsluice.so.$(SO_MAJOR)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/libsluice.so
	$(INSTALL) -m 644 $(CLIENT_LIB) $(DESTDIR)$(LIBDIR)/libsluice.a
	$(INSTALL) -m 644 client/lib/sluice.h $(DESTDIR)$(INCLUDEDIR)/sluice.h
	$(INSTALL) -m 644 common/plugin/sluice_plugin.h $(DESTDIR)$(INCLUDEDIR)/sluice_plugin.h
	$(INSTALL) -m 755 $(BUILD)/bin/sluice-plugin-host $(DESTDIR)$(BINDIR)/
	$(INSTALL) -d $(DESTDIR)$(DATADIR)/sluice/examples/plugins
	$(INSTALL) -m 644 $(filter $(BUILD)/plugins/%,$(PLUGINS)) $(wildcard examples/plugins/*.c) \
	  $(DESTDIR)$(DATADIR)/sluice/examples/plugins/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	  -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  -e 's|@PKGS@|$(filter-out libcurl,$(PKGS))|g' client/lib/sluice.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/sluice.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/sluice.pc
	for u in $(UNITS); do \
	  sed $(PATH_SED) $$u >$(DESTDIR)$(UNITDIR)/$$(basename $$u) && \
	  chmod 644 $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	for m in $(MAN_PAGES); do \
	  sed $(PATH_SED) $$m >$(DESTDIR)$(MANDIR)/man1/$$(basename $$m) && \
	  chmod 644 $(DESTDIR)$(MANDIR)/man1/$$(basename $$m) || exit 1; \
	done
	for c in $(CONFS); do \
	  t=$(DESTDIR)$(SYSCONFDIR)/sluice/$$(basename $$c); \
	  if [ -e $$t ]; then echo "  keeping $$t"; else $(INSTALL) -m 644 $$c $$t || exit 1; fi; \
	done
	$(INSTALL) -m 644 $(EXAMPLES) $(CONFS) $(DESTDIR)$(DATADIR)/sluice/examples/
	$(INSTALL) -m 644 README.md $(DESTDIR)$(DOCDIR)/README.md
	# The README links into docs/: install them with the same layout so the links resolve.
	$(INSTALL) -d $(DESTDIR)$(DOCDIR)/docs/reference $(DESTDIR)$(DOCDIR)/docs/img
	$(INSTALL) -m 644 $(wildcard docs/*.md) $(DESTDIR)$(DOCDIR)/docs/
	$(INSTALL) -m 644 $(wildcard docs/reference/*.md) $(DESTDIR)$(DOCDIR)/docs/reference/
	$(INSTALL) -m 644 $(wildcard docs/img/*.png) $(DESTDIR)$(DOCDIR)/docs/img/
	$(INSTALL) -m 644 $(PY_SRC) $(DESTDIR)$(PYTHONDIR)/sluice/
	printf '# Written by make install.\nLIBSLUICE = "%s"\n' '$(LIBDIR)/libsluice.so.$(SO_MAJOR)' \
	  >$(DESTDIR)$(PYTHONDIR)/sluice/_installed.py
	@echo "installed under $(DESTDIR)$(PREFIX) (units in $(DESTDIR)$(UNITDIR))"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(BINS))) $(DESTDIR)$(BINDIR)/sluice-plugin-host \
	  $(DESTDIR)$(INCLUDEDIR)/sluice_plugin.h
	rm -f $(DESTDIR)$(LIBDIR)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/libsluice.so.$(SO_MAJOR) \
	  $(DESTDIR)$(LIBDIR)/libsluice.so $(DESTDIR)$(LIBDIR)/libsluice.a \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/sluice.pc $(DESTDIR)$(INCLUDEDIR)/sluice.h
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(UNITS)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES)))
	for c in $(CONFS); do \
	  t=$(DESTDIR)$(SYSCONFDIR)/sluice/$$(basename $$c); \
	  if cmp -s $$c $$t; then rm -f $$t; elif [ -e $$t ]; then echo "  keeping edited $$t"; fi; \
	done
	rm -rf $(DESTDIR)$(DATADIR)/sluice $(DESTDIR)$(DOCDIR) $(DESTDIR)$(PYTHONDIR)/sluice
	-rmdir $(DESTDIR)$(SYSCONFDIR)/sluice 2>/dev/null

# ---- the units booted (docs/deploy.md "Deploying on a cluster"): root, debootstrap and
# systemd-nspawn; not part of `make check`.
test-systemd: all
	./scripts/test-systemd

# Debian packages from a staged make install (dpkg-deb; into $(BUILD)/deb);
# `make test-systemd-deb` installs them with apt in the booted container.
deb: all
	BUILD=$(BUILD) ./scripts/make-debs --out $(BUILD)/deb

test-systemd-deb: deb
	BUILD=$(BUILD) ./scripts/test-systemd --debs $(BUILD)/deb

# The Python package as one self-contained wheel (scripts/make-wheel: libsluice,
# the libraries it needs and sluice-plugin-host inside, RPATHs via patchelf) into
# $(BUILD)/wheel; `make test-wheel` installs it in a bare Debian 13 chroot
# (debootstrap, cached under $(BUILD)/wheel-chroot; root; not part of `make check`).
.PHONY: wheel test-wheel
wheel: $(CLIENT_SO) $(BUILD)/bin/sluice-plugin-host
	BUILD=$(BUILD) ./scripts/make-wheel

test-wheel: all
	BUILD=$(BUILD) ./scripts/test-wheel

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
