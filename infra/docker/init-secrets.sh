#!/usr/bin/env bash
# Creates, once, what docker-compose.yml reads from outside the repository: its secrets (random, hex) and a
# self-signed certificate for Traefik's TLS entry point. Run it before the first `docker compose up`:
#
#   infra/docker/init-secrets.sh
#
# Files that exist are kept, never replaced: MongoDB creates its users from these passwords only on its first start,
# so a new password would no longer match the database's. To start over, remove the files and the mongodb-data volume.
#
# Environment:
#   HERALD_SECRETS_DIR  where the secrets go (default infra/docker/secrets; docker-compose.yml reads the same variable)
#   HERALD_CERTS_DIR    where the certificate goes (default infra/traefik/certs; likewise)
#   HERALD_TLS_NAMES    the certificate's DNS names, comma-separated (default localhost; 127.0.0.1 is always added)
#
# Modes: the directories 0700 (other users of this host cannot read inside), the secret files 0644: Compose without
# Swarm bind-mounts a secret file with its own owner and mode, and the containers read them as their own users
# (node, mongodb, grafana), not as the owner of the file. The private key stays 0600: Traefik reads it as root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
secrets=${HERALD_SECRETS_DIR:-$root/infra/docker/secrets}
certs=${HERALD_CERTS_DIR:-$root/infra/traefik/certs}
names=${HERALD_TLS_NAMES:-localhost}

die() { printf 'init-secrets: %s\n' "$*" >&2; exit 1; }

command -v openssl >/dev/null || die "openssl is not installed"
[[ $names =~ ^[A-Za-z0-9.,*-]+$ ]] || die "HERALD_TLS_NAMES must be DNS names separated by commas, got '$names'"

random_hex() { openssl rand -hex "$1"; }

# write NAME VALUE: the file NAME in the secrets directory, unless it exists.
write() {
  local file=$secrets/$1
  if [[ -e $file ]]; then
    printf 'kept     %s\n' "$file"
    return 0
  fi
  (umask 022 && printf '%s' "$2" >"$file")
  printf 'created  %s\n' "$file"
}

mkdir -p "$secrets" "$certs"
chmod 0700 "$secrets" "$certs"

write jwt_secret "$(random_hex 32)"
write mongodb_root_password "$(random_hex 24)"
write mongodb_app_password "$(random_hex 24)"
# The gateway's connection string, for the app user that infra/docker/mongo-init creates from the same password.
app_password=$(head -n 1 "$secrets/mongodb_app_password")
write mongodb_url "mongodb://herald:${app_password}@mongodb:27017/am_bench?authSource=am_bench"
write grafana_admin_password "$(random_hex 16)"

if [[ -e $certs/herald.crt && -e $certs/herald.key ]]; then
  printf 'kept     %s\n' "$certs/herald.crt"
else
  san="IP:127.0.0.1"
  IFS=, read -ra dns <<<"$names"
  for name in "${dns[@]}"; do san="$san,DNS:$name"; done
  (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=${dns[0]}" \
    -addext "subjectAltName=$san" -keyout "$certs/herald.key" -out "$certs/herald.crt" 2>/dev/null)
  chmod 0644 "$certs/herald.crt"
  printf 'created  %s (self-signed for %s; clients must trust it: NODE_EXTRA_CA_CERTS=%s)\n' \
    "$certs/herald.crt" "$san" "$certs/herald.crt"
fi
