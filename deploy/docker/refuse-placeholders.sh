#!/bin/bash
# Refuses to go on while a password is still a placeholder the project publishes: the
# change-me of .env.example, the REPLACE_ME of k8s/secret.yaml.example, the '...' of the
# documentation's examples.  Anyone can read those, so a service started with one would be
# open to all; Couchbase would even keep such an administrator password after .env is fixed.
#
#   refuse-placeholders.sh     checks every environment variable whose name ends in PASSWORD
#
# Exit status 0, or 78 (EX_CONFIG) with the variables to set on stderr.  The image's
# entrypoint and couchbase-init.sh run it before they start anything.
set -euo pipefail

placeholders=(change-me replace_me ...)

refused=()
while IFS= read -r name; do
  value=${!name}
  for placeholder in "${placeholders[@]}"; do
    if [ "${value,,}" = "$placeholder" ]; then
      refused+=("$name")
    fi
  done
done < <(compgen -e | grep -E 'PASSWORD$' || true)

if [ ${#refused[@]} -gt 0 ]; then
  for name in "${refused[@]}"; do
    echo "refusing to start: $name is still the placeholder '${!name}': set a password of your own" >&2
  done
  echo "(docker compose: in .env, copied from .env.example; Kubernetes: in the Secret" \
    "mta-store-credentials, see deploy/README.md)" >&2
  exit 78
fi
