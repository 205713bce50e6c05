# Herald: `make run` starts one node with embedded defaults; `make test` runs every test.
# Both install what is missing first: Node.js 24, pnpm, the workspace's packages (and for tests redis-server, HAProxy
# and Chromium).
# `make cluster N=3` starts a local fleet in the background (Redis, N nodes, HAProxy); `make cluster-stop` ends it.
# `make bench-fleet` runs AnyCable's broker benchmark scenario on such a fleet (docs/benchmarks/fleet.md).
SHELL := /bin/bash
NODE_MAJOR := 24
PNPM_VERSION := 12.4.2
N ?= 3

.PHONY: run test deps node pnpm packages redis haproxy chromium typecheck unit cluster cluster-stop bench bench-quick bench-fleet scale

# NODE_COMPILE_CACHE: Node.js keeps the compiled modules (types stripped) there, so that a node's next start neither
# compiles them nor loads the type stripper: ~30 MB less per node process (docs/configuration.md).
run: deps
	NODE_COMPILE_CACHE=.run/node-compile-cache node --no-node-snapshot --max-semi-space-size=16 packages/gateway/src/main.ts

test: deps redis haproxy chromium typecheck unit

typecheck:
	pnpm run typecheck

unit:
	pnpm run test

deps: node pnpm packages

# The machine may ship an older Node; the `node` package from npm brings 24 (isolated-vm 7 needs it).
node:
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= $(NODE_MAJOR) ? 0 : 1)' 2>/dev/null \
	  || { echo "installing Node.js $(NODE_MAJOR)"; npm i -g --force node@$(NODE_MAJOR); }
	@node --version

# After Node 24 arrives npm's global prefix moves, so pnpm goes to /usr explicitly.
pnpm:
	@[ "$$(pnpm --version 2>/dev/null)" = "$(PNPM_VERSION)" ] \
	  || { echo "installing pnpm $(PNPM_VERSION)"; npm i -g --prefix /usr pnpm@$(PNPM_VERSION); }

packages:
	pnpm install --frozen-lockfile

# Tests start their own redis-server processes on free ports; they only need the binaries.
redis:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
	  || { apt-get update -qq && apt-get install -y -qq redis-server redis-tools; }

# Headless Chromium for the tests of the client's example page and the status page (playwright-core drives Debian's
# package: playwright's own browser download is not used).
chromium:
	@[ -x /usr/bin/chromium ] || { apt-get update -qq && apt-get install -y -qq chromium; }

# The local fleet's load balancer; `make test` checks the rendered config with `haproxy -c`.
haproxy:
	@command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] \
	  || { apt-get update -qq && apt-get install -y -qq haproxy; }

# One redis-server (REDIS_CLUSTER=1: a 3-master Redis Cluster), N nodes on PORT+1..PORT+N, HAProxy on PORT
# (default 38246). Returns once all answer /readyz; pids and logs in .run/cluster/. See infra/local/cluster.sh.
cluster: deps redis haproxy
	N='$(N)' infra/local/cluster.sh start

# Needs nothing installed: it only signals the pids that `make cluster` recorded.
cluster-stop:
	infra/local/cluster.sh stop

# The benchmark suite (bench/run.ts): the gateway, Socket.IO + redis-adapter and bare ws, each on a fresh
# redis-server; results in docs/benchmarks/ (how they are measured: docs/benchmarks/methodology.md). bench-quick:
# levels 0-6k, ~3-4 minutes; bench: levels 0-18k.
bench-quick: deps redis
	node bench/run.ts --quick

bench: deps redis
	node bench/run.ts

# AnyCable's broker benchmark scenario (bench/fleet.ts, docs/benchmarks/fleet.md): one redis-server, 3 nodes behind
# HAProxy, on free ports; `wsload channels` with 1,500 clients on 5 channels, half of them senders, history fetched at
# join, at 0.1×, 0.2×, 0.5×, 1× and 10× of 0.7 broadcasts a second a sender, twice each (~8 minutes). Stops by itself, and stops
# every process it started. ARGS passes more options (e.g. ARGS="--levels 1,2,5 --rounds 1"; --record writes the
# figures into docs/benchmarks/results.json).
bench-fleet: deps redis haproxy
	node bench/fleet.ts $(ARGS)

# Scale on one machine (bench/scale.ts, docs/benchmarks/scale.md): Redis and as many nodes as CLIENTS need, then
# wsload's workers hold CLIENTS clients, level by level, each level's memory sampled; then notifications, broadcasts,
# a rolling restart and every client leaving. DRY_RUN=1 prints the plan only; RATE (clients a second, default 2000);
# ARGS passes more options (node bench/scale.ts --help). It raises kernel limits it needs and restores them after.
RATE ?= 2000
scale: deps redis
	@[ -n "$(CLIENTS)" ] || { echo 'make scale CLIENTS=<n> [RATE=2000] [DRY_RUN=1] [ARGS="..."], e.g. make scale CLIENTS=800000 DRY_RUN=1'; exit 2; }
	bench/scale.sh --clients $(CLIENTS) --rate $(RATE) $(if $(DRY_RUN),--dry-run) $(ARGS)
