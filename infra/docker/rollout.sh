#!/usr/bin/env bash
# A rolling update of the gateway under Docker Compose, which has none of its own (`docker compose up` recreates
# every container of a service at once). What docker-rollout and the like do, in the open:
#
#   1. build the new image (skip with NO_BUILD=1);
#   2. start as many new containers beside the old ones: `up -d --no-deps --no-recreate --scale gateway=2N`
#      (--no-recreate keeps the old ones as they are; the new ones run the new image);
#   3. wait until every new one is `healthy` (its /readyz: broker ready, port open); if one is not within
#      HEALTH_TIMEOUT seconds, remove the new ones and stop: the old ones never stopped serving;
#   4. stop the old ones one at a time with `docker stop`, which sends SIGTERM and waits the container's
#      stop_grace_period: each drains (/readyz 503, so Traefik stops sending it clients; its clients told 1001 in
#      batches, to reconnect through Traefik to the others), then exits; then remove them;
#   5. `up -d --no-deps --no-recreate --scale gateway=N`, which finds N containers and changes nothing, so that the
#      next plain `docker compose up` keeps N.
#
#   infra/docker/rollout.sh                  # the gateway service of ./docker-compose.yml
#   SERVICE=gateway HEALTH_TIMEOUT=120 NO_BUILD=1 infra/docker/rollout.sh
#
# Compose's own variables (COMPOSE_FILE, COMPOSE_PROJECT_NAME, ...) apply. Needs room for 2N nodes for a while.
set -euo pipefail

SERVICE=${SERVICE:-gateway}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-120}

say() { printf 'rollout: %s\n' "$*"; }
die() { printf 'rollout: %s\n' "$*" >&2; exit 1; }

[[ $HEALTH_TIMEOUT =~ ^[0-9]+$ ]] || die "HEALTH_TIMEOUT must be seconds, got '$HEALTH_TIMEOUT'"

containers() { docker compose ps -q "$SERVICE"; }

mapfile -t old < <(containers)
count=${#old[@]}
((count > 0)) || die "no running $SERVICE container: start it with docker compose up -d first"

if [[ ${NO_BUILD:-} != 1 ]]; then
  say "building $SERVICE"
  docker compose build "$SERVICE"
fi

say "starting $count new $SERVICE container(s) beside the $count running"
docker compose up -d --no-deps --no-recreate --scale "$SERVICE=$((count * 2))" "$SERVICE"

mapfile -t new < <(containers | grep -vxF -f <(printf '%s\n' "${old[@]}") || true)
((${#new[@]} == count)) || die "expected $count new containers, found ${#new[@]}: ${new[*]:-none}"

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$1"; }

deadline=$((SECONDS + HEALTH_TIMEOUT))
for id in "${new[@]}"; do
  until [[ $(health "$id") == healthy ]]; do
    if ((SECONDS >= deadline)); then
      say "$id is not healthy after ${HEALTH_TIMEOUT} s ($(health "$id")); removing the new containers, the old ones keep serving" >&2
      docker stop "${new[@]}" >/dev/null
      docker rm "${new[@]}" >/dev/null
      exit 1
    fi
    sleep 1
  done
  say "$id healthy"
done

for id in "${old[@]}"; do
  say "draining $id (SIGTERM; it exits by its drain deadline)"
  docker stop "$id" >/dev/null
  docker rm "$id" >/dev/null
done

docker compose up -d --no-deps --no-recreate --scale "$SERVICE=$count" "$SERVICE"
say "done: $count $SERVICE container(s) on the new image"
