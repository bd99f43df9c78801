#!/bin/bash
# One-shot initialisation of the compose file's Couchbase Server (the
# couchbase-init service runs it once the server answers; running it again is
# harmless).  Through Couchbase's REST API:
#
#   1. provision a one-node cluster named $COUCHBASE_HOST, Data service only,
#      administrator $COUCHBASE_ADMIN_USERNAME / $COUCHBASE_ADMIN_PASSWORD;
#   2. create the bucket $COUCHBASE_BUCKET (no replicas: one node), then the scope
#      $COUCHBASE_SCOPE and the collection $COUCHBASE_COLLECTION in it;
#   3. create (or update) the application user $COUCHBASE_USERNAME /
#      $COUCHBASE_PASSWORD with access to that bucket only: the jobs use it, not
#      the administrator.
#
# Passwords never appear on a command line: curl reads them from files only this
# script can read.  It refuses the placeholder passwords of .env.example
# (refuse-placeholders.sh, mounted beside it).
set -euo pipefail

host=${COUCHBASE_HOST:-couchbase}
admin=${COUCHBASE_ADMIN_USERNAME:?COUCHBASE_ADMIN_USERNAME is not set}
: "${COUCHBASE_ADMIN_PASSWORD:?COUCHBASE_ADMIN_PASSWORD is not set}"
user=${COUCHBASE_USERNAME:?COUCHBASE_USERNAME is not set}
: "${COUCHBASE_PASSWORD:?COUCHBASE_PASSWORD is not set}"
bucket=${COUCHBASE_BUCKET:-mta}
scope=${COUCHBASE_SCOPE:-windows}
collection=${COUCHBASE_COLLECTION:-levels}
ram=${COUCHBASE_RAM_MB:-1024}
bucket_ram=${COUCHBASE_BUCKET_RAM_MB:-512}
rest="http://$host:${COUCHBASE_REST_PORT:-8091}"

# before provisioning: the cluster keeps the administrator password it is provisioned with
bash "$(dirname "${BASH_SOURCE[0]}")/refuse-placeholders.sh"

umask 077
secrets=$(mktemp -d)
trap 'rm -rf "$secrets"' EXIT
printf 'machine %s login %s password %s\n' "$host" "$admin" "$COUCHBASE_ADMIN_PASSWORD" > "$secrets/netrc"
printf '%s' "$COUCHBASE_ADMIN_PASSWORD" > "$secrets/admin"
printf '%s' "$COUCHBASE_PASSWORD" > "$secrets/user"

say() { echo "couchbase-init: $*"; }
api() { curl --silent --show-error --fail --netrc-file "$secrets/netrc" "$@"; }

say "waiting for $rest"
for _ in $(seq 120); do
  curl --silent --fail --output /dev/null "$rest/pools" && break
  sleep 1
done

if api --output /dev/null "$rest/pools/default" 2>/dev/null; then
  say "cluster already provisioned"
else
  say "provisioning the cluster (Data service, ${ram} MiB)"
  curl --silent --show-error --fail --output /dev/null -X POST "$rest/clusterInit" \
    --data-urlencode "hostname=$host" \
    --data-urlencode "username=$admin" \
    --data-urlencode "password@$secrets/admin" \
    --data-urlencode "services=kv" \
    --data-urlencode "memoryQuota=$ram" \
    --data-urlencode "clusterName=mta-windows" \
    --data-urlencode "port=SAME"
fi

if api --output /dev/null "$rest/pools/default/buckets/$bucket" 2>/dev/null; then
  say "bucket $bucket exists"
else
  say "creating bucket $bucket (${bucket_ram} MiB, no replicas)"
  api --output /dev/null -X POST "$rest/pools/default/buckets" \
    --data-urlencode "name=$bucket" \
    --data-urlencode "bucketType=couchbase" \
    --data-urlencode "ramQuota=$bucket_ram" \
    --data-urlencode "replicaNumber=0" \
    --data-urlencode "flushEnabled=0"
fi
say "waiting for bucket $bucket to be ready"
for _ in $(seq 120); do
  api "$rest/pools/default/buckets/$bucket" 2>/dev/null | grep -q '"status":"healthy"' && break
  sleep 1
done

# create WHAT URL NAME: POST name=NAME to URL; "already exists" is fine
create() {
  local what=$1 url=$2 name=$3 reply status
  reply=$(curl --silent --show-error --netrc-file "$secrets/netrc" --write-out '\n%{http_code}' \
    -X POST "$url" --data-urlencode "name=$name")
  status=${reply##*$'\n'}
  if [ "$status" = 200 ]; then
    say "created $what $name"
  elif grep -qi "already exists" <<<"$reply"; then
    say "$what $name exists"
  else
    say "cannot create $what $name: HTTP $status: ${reply%$'\n'*}" >&2
    return 1
  fi
}
create scope "$rest/pools/default/buckets/$bucket/scopes" "$scope"
create collection "$rest/pools/default/buckets/$bucket/scopes/$scope/collections" "$collection"

say "granting user $user access to bucket $bucket"
api --output /dev/null -X PUT "$rest/settings/rbac/users/local/$user" \
  --data-urlencode "password@$secrets/user" \
  --data-urlencode "roles=bucket_full_access[$bucket]"

say "ready: couchbase://$host/$bucket?scope=$scope&collection=$collection (user $user)"
