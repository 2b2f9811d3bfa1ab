# Sluice: one non-recursive Makefile. Output goes under $(BUILD).
#   make            build everything
#   make check      unit + integration tests
#   make asan       the same suite under ASan+UBSan (build-asan/)
#   make demo       dispatcher + workers on loopback, a job, its throughput
#   V=1             show full commands

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

PKGS := grpc gpr libprotobuf-c libevent libevent_pthreads jansson libturbojpeg libjpeg
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
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

COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRC)) $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_C))
COMMON_LIB := $(BUILD)/lib/libsluice_common.a

CLIENT_LIB_SRC := $(filter-out client/cli%.c,$(wildcard client/*.c))
CLIENT_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLIENT_LIB_SRC))
CLIENT_LIB := $(BUILD)/lib/libsluice.a
CLIENT_SO := $(BUILD)/lib/libsluice.so
CLI_SRC := $(wildcard client/cli*.c)
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))

DISP_SRC := $(wildcard dispatcher/*.c)
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

TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_HELPER_SRC := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TEST_HELPER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_HELPER_SRC))
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BINS := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

.SECONDARY:
.PHONY: all check unit integration asan demo deps bench bench-quick fuzz soak clean
all: $(BINS) $(CLIENT_SO) $(TEST_BINS) $(TOOL_BINS)

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

$(CLIENT_LIB): $(CLIENT_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(CLIENT_SO): $(CLIENT_LIB_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/sluice: $(CLI_OBJ) $(CLIENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/sluice-dispatcher: $(DISP_OBJ) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/sluice-worker: $(WORKER_OBJ) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests may test daemon modules too: link the daemon objects except main.o.
DISP_LIB_OBJ := $(filter-out %/main.o,$(DISP_OBJ))
WORKER_LIB_OBJ := $(filter-out %/main.o,$(WORKER_OBJ))
$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(TEST_HELPER_OBJ) $(DISP_LIB_OBJ) $(WORKER_LIB_OBJ) $(CLIENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJ) -Wl,--start-group $(DISP_LIB_OBJ) $(WORKER_LIB_OBJ) $(CLIENT_LIB) $(COMMON_LIB) -Wl,--end-group $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(CLIENT_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

deps:
	@pkg-config --exists $(PKGS) check && command -v protoc-c >/dev/null && \
	  /usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null || ./scripts/install-deps.sh

# Re-invoke make after deps so pkg-config flags are evaluated with packages present.
check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./tests/run-unit.sh $(TEST_BINS)
	$(Q)BUILD=$(BUILD) ./tests/run-integration.sh

unit: all
	$(Q)BUILD=$(BUILD) ./tests/run-unit.sh $(TEST_BINS)

integration: all
	$(Q)BUILD=$(BUILD) ./tests/run-integration.sh

asan: deps
	$(Q)$(MAKE) --no-print-directory SANITIZE=1 check

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./scripts/demo.sh

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) ./scripts/bench-local

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
