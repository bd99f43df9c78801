#!/bin/bash
# Build the project's wheel and spark-submit an mta-spark command to a cluster.
#
#   deploy/submit.sh [spark-submit options] -- COMMAND [mta-spark options]
#
# e.g.
#   deploy/submit.sh --master yarn --deploy-mode cluster --num-executors 4 -- \
#       run --input hdfs:///readings --output hdfs:///windows --key host --time ts \
#       --value mem --agg max,mean --range 3600 --engine amta --store redis://redis.example.com:6379/0
#
# It runs $SPARK_HOME/bin/spark-submit (or the spark-submit on PATH) with
# deploy/mta_spark_main.py as the application, which runs the mta-spark COMMAND
# on the session spark-submit configured (mta-spark's own --master is ignored).
#
# Shipping the code, MTA_SHIP:
#   pyfiles   (default) build the wheel (pip wheel --no-deps) and ship it with
#             --py-files, renamed .zip (Spark takes .zip/.egg/.py there; a
#             wheel is a zip archive Python imports from; its compiled cores
#             are not loaded from a zip, so mta runs its pure-Python engines).  The
#             cluster's Python must already have the dependencies: pyspark's
#             pandas and pyarrow, msgpack, and redis or couchbase.
#   archive   ship a whole virtualenv packed with venv-pack, MTA_VENV_ARCHIVE=
#             path.tar.gz, via --archives (spark.archives) as ./environment:
#             executors run its Python with every dependency.  In client mode the
#             driver runs MTA_DRIVER_PYTHON (default: $PYTHON), which needs the
#             project installed too.
#
# Also added: the RocksDB state store provider (for `stream`), unless the
# properties file (yours or spark-defaults.conf) names one.  Your own options come
# after and win.
#
# Store credentials: MTA_REDIS_PASSWORD, MTA_REDIS_USERNAME, COUCHBASE_USERNAME and
# COUCHBASE_PASSWORD, when set here, reach the driver and the executors through a
# properties file only you can read (spark.executorEnv.*, spark.yarn.appMasterEnv.*),
# never a command line.  It replaces spark-defaults.conf, so the defaults
# ($SPARK_CONF_DIR or $SPARK_HOME/conf, or your --properties-file) are copied into
# it first.  Spark's UI redacts the passwords (spark.redaction.regex).
#
# With a k8s:// master no value is passed: Spark would write it into the pods' specs
# and the driver's config map, which whoever reads pods or config maps sees.  The
# pods take the variables from a Secret instead
# (spark.kubernetes.{driver,executor}.secretKeyRef.VAR=NAME:VAR; deploy/README.md
# shows how to create it):
#   MTA_K8S_SECRET       the Secret's name (default: mta-store-credentials)
#   MTA_K8S_SECRET_KEYS  the variables to take from it, comma-separated (default: those
#                        of the four set here; the Secret must hold each one)
# and the driver and executor pods get the label app.kubernetes.io/part-of=mta-windows, which
# (with Spark's own spark-role label) is what lets them through deploy/k8s/redis.yaml's
# NetworkPolicy to Redis; a --properties-file or --conf of your own can change it.
#
# Other environment variables:
#   PYTHON       the Python that builds the wheel (default: python3)
#   MTA_DIST     keep the wheel and the .zip there (default: a temporary directory)
#   MTA_DRY_RUN  1: print the spark-submit command and the names of the properties
#                it would pass, run nothing
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
entry="$here/mta_spark_main.py"
python=${PYTHON:-python3}
ship=${MTA_SHIP:-pyfiles}
rocksdb=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider
credentials=(MTA_REDIS_PASSWORD MTA_REDIS_USERNAME COUCHBASE_USERNAME COUCHBASE_PASSWORD)
k8s_label=app.kubernetes.io/part-of=mta-windows

usage() {
  sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# the value of the option at submit_opts[i], which must be there
value_at() {
  if [ "$1" -ge "${#submit_opts[@]}" ]; then
    echo "submit.sh: ${submit_opts[$1 - 1]} needs a value" >&2
    usage
  fi
  printf '%s' "${submit_opts[$1]}"
}

# split: spark-submit options -- mta-spark arguments
submit_opts=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  submit_opts+=("$1")
  shift
done
[ $# -gt 0 ] || usage
shift
[ $# -gt 0 ] || usage
mta_args=("$@")

if [ -n "${SPARK_HOME:-}" ]; then
  spark_submit="$SPARK_HOME/bin/spark-submit"
else
  spark_submit=$(command -v spark-submit) || { echo "submit.sh: set SPARK_HOME or put spark-submit on PATH" >&2; exit 2; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the user's --properties-file and --py-files are merged with ours
properties_base="" py_files="" deploy_mode=client master="" opts=()
i=0
while [ $i -lt ${#submit_opts[@]} ]; do
  opt=${submit_opts[$i]}
  case "$opt" in
    --properties-file) i=$((i + 1)); properties_base=$(value_at $i) ;;
    --properties-file=*) properties_base=${opt#*=} ;;
    --py-files) i=$((i + 1)); py_files=$(value_at $i) ;;
    --py-files=*) py_files=${opt#*=} ;;
    --deploy-mode) i=$((i + 1)); deploy_mode=$(value_at $i); opts+=("$opt" "$deploy_mode") ;;
    --deploy-mode=*) deploy_mode=${opt#*=}; opts+=("$opt") ;;
    --master) i=$((i + 1)); master=$(value_at $i); opts+=("$opt" "$master") ;;
    --master=*) master=${opt#*=}; opts+=("$opt") ;;
    *) opts+=("$opt") ;;
  esac
  i=$((i + 1))
done
if [ -z "$properties_base" ]; then
  conf_dir=${SPARK_CONF_DIR:-${SPARK_HOME:+$SPARK_HOME/conf}}
  if [ -n "$conf_dir" ] && [ -f "$conf_dir/spark-defaults.conf" ]; then
    properties_base="$conf_dir/spark-defaults.conf"
  fi
fi
# a property of the base file, if set there (last one wins, as in Spark)
base_property() {
  [ -n "$properties_base" ] || return 0
  sed -n "s/^[[:space:]]*$1[[:space:]]*[=:[:space:]][[:space:]]*//p" "$properties_base" | tail -n 1
}
[ -n "$master" ] || master=$(base_property 'spark\.master')

# -- the code -----------------------------------------------------------------------
ship_opts=()
case "$ship" in
  pyfiles)
    dist=${MTA_DIST:-$work/dist}
    mkdir -p "$dist" "$work/src" "$work/wheel"
    cp -R "$root/pyproject.toml" "$root/README.md" "$root/LICENSE" "$root/mta" "$root/stores" "$root/spark_ops" "$work/src/"
    echo "submit.sh: building the wheel (pip wheel --no-deps) into $dist" >&2
    "$python" -m pip wheel --no-deps --quiet --disable-pip-version-check --wheel-dir "$work/wheel" "$work/src" >&2
    wheel=$(ls "$work"/wheel/mta_windows-*.whl)
    cp "$wheel" "$dist/"
    cp "$wheel" "$dist/mta_windows.zip"
    ship_opts+=(--py-files "${py_files:+$py_files,}$dist/mta_windows.zip")
    ;;
  archive)
    : "${MTA_VENV_ARCHIVE:?MTA_SHIP=archive needs MTA_VENV_ARCHIVE=path/to/venv.tar.gz (venv-pack -o ...)}"
    [ -n "$py_files" ] && ship_opts+=(--py-files "$py_files")
    ship_opts+=(--archives "$MTA_VENV_ARCHIVE#environment"
                --conf spark.pyspark.python=./environment/bin/python)
    if [ "$deploy_mode" = client ]; then
      ship_opts+=(--conf "spark.pyspark.driver.python=${MTA_DRIVER_PYTHON:-$python}")
    fi
    ;;
  *)
    echo "submit.sh: MTA_SHIP must be pyfiles or archive, not $ship" >&2
    exit 2
    ;;
esac

# -- configuration and credentials: a properties file only we can read -----------------
escape() {  # a Java properties value
  local v=${1//\\/\\\\}
  [ "${v:0:1}" = " " ] && v="\\$v"
  printf '%s' "$v"
}
# on Kubernetes, references to a Secret's keys instead of the values
on_k8s=no k8s_secret_keys=""
case "$master" in k8s://*) on_k8s=yes ;; esac
if [ "$on_k8s" = yes ]; then
  k8s_secret=${MTA_K8S_SECRET:-mta-store-credentials}
  if [ -n "${MTA_K8S_SECRET_KEYS:-}" ]; then
    for name in ${MTA_K8S_SECRET_KEYS//,/ }; do
      case " ${credentials[*]} " in
        *" $name "*) k8s_secret_keys+="$name " ;;
        *) echo "submit.sh: MTA_K8S_SECRET_KEYS: $name is none of ${credentials[*]}" >&2; exit 2 ;;
      esac
    done
  else
    for name in "${credentials[@]}"; do
      [ -n "${!name:-}" ] && k8s_secret_keys+="$name "
    done
  fi
  if [ -n "$k8s_secret_keys" ]; then
    echo "submit.sh: k8s master: the pods take ${k8s_secret_keys% } from Secret $k8s_secret" \
      "(no value is passed)" >&2
  fi
fi
properties="$work/spark.properties"
(
  umask 077
  {
    if [ "$on_k8s" = yes ]; then
      for role in driver executor; do
        echo "spark.kubernetes.$role.label.$k8s_label"
      done
    fi
    if [ -n "$properties_base" ]; then
      cat "$properties_base"
      echo
    fi
    if [ -z "$(base_property 'spark\.sql\.streaming\.stateStore\.providerClass')" ]; then
      echo "spark.sql.streaming.stateStore.providerClass=$rocksdb"
    fi
    if [ -n "$k8s_secret_keys" ]; then
      for name in $k8s_secret_keys; do
        for role in driver executor; do
          echo "spark.kubernetes.$role.secretKeyRef.$name=$k8s_secret:$name"
        done
      done
    elif [ "$on_k8s" != yes ]; then
      for name in "${credentials[@]}"; do
        if [ -n "${!name:-}" ]; then
          value=$(escape "${!name}")
          for prefix in spark.executorEnv spark.yarn.appMasterEnv; do
            echo "$prefix.$name=$value"
          done
        fi
      done
    fi
  } > "$properties"
)

command=("$spark_submit" --properties-file "$properties" "${ship_opts[@]}" "${opts[@]}" "$entry" "${mta_args[@]}")
if [ "${MTA_DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${command[@]}"
  echo
  echo "properties:"
  sed -n 's/^\([A-Za-z][^=[:space:]]*\)[=[:space:]].*/  \1/p' "$properties"
  exit 0
fi
status=0
"${command[@]}" || status=$?
exit "$status"
