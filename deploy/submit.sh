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
# Also added: the RocksDB state store provider (for `stream`).  Your own options
# come after and win.
#
# Store credentials: MTA_REDIS_PASSWORD, MTA_REDIS_USERNAME, COUCHBASE_USERNAME and
# COUCHBASE_PASSWORD, when set here, reach the driver and the executors through a
# properties file only you can read (spark.executorEnv.*, spark.yarn.appMasterEnv.*,
# spark.kubernetes.driverEnv.*), never a command line.  It replaces
# spark-defaults.conf, so the defaults ($SPARK_CONF_DIR or $SPARK_HOME/conf, or
# your --properties-file) are copied into it first.  Spark's UI redacts the
# passwords (spark.redaction.regex).  On Kubernetes prefer Secrets (deploy/README.md).
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

usage() {
  sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
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
properties_base="" py_files="" deploy_mode=client opts=()
i=0
while [ $i -lt ${#submit_opts[@]} ]; do
  opt=${submit_opts[$i]}
  case "$opt" in
    --properties-file) i=$((i + 1)); properties_base=${submit_opts[$i]} ;;
    --properties-file=*) properties_base=${opt#*=} ;;
    --py-files) i=$((i + 1)); py_files=${submit_opts[$i]} ;;
    --py-files=*) py_files=${opt#*=} ;;
    --deploy-mode) opts+=("$opt"); i=$((i + 1)); deploy_mode=${submit_opts[$i]}; opts+=("$deploy_mode") ;;
    --deploy-mode=*) deploy_mode=${opt#*=}; opts+=("$opt") ;;
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
properties="$work/spark.properties"
(
  umask 077
  {
    if [ -n "$properties_base" ]; then
      cat "$properties_base"
      echo
    fi
    echo "spark.sql.streaming.stateStore.providerClass=$rocksdb"
    for name in "${credentials[@]}"; do
      if [ -n "${!name:-}" ]; then
        value=$(escape "${!name}")
        for prefix in spark.executorEnv spark.yarn.appMasterEnv spark.kubernetes.driverEnv; do
          echo "$prefix.$name=$value"
        done
      fi
    done
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
