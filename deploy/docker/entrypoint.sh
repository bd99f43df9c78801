#!/bin/bash
# Entrypoint of the project image (the Dockerfile runs it under tini).
#
#   entrypoint.sh driver SPARK-SUBMIT-ARGS...   Spark on Kubernetes: the driver pod
#   entrypoint.sh executor                      Spark on Kubernetes: an executor pod
#   entrypoint.sh COMMAND [ARGS...]             anything else, run as given: mta-spark ...,
#                                               spark-class ...Master / ...Worker, spark-submit, bash
#
# Spark's Kubernetes backend starts its pods with the arguments "driver ..." or
# "executor" and the SPARK_* variables used below, as the entrypoint of Spark's
# own images expects; this script does the same with the Spark that the pyspark
# package ships ($SPARK_HOME).
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")

# A password still at a placeholder of .env.example or k8s/secret.yaml.example is refused
# before anything starts with it.
bash "$here/refuse-placeholders.sh"

# Spark's Hadoop login (UserGroupInformation) asks the system for the name and home of the
# process's uid, and stops ("Invalid UID, could not determine effective user") when
# /etc/passwd has no entry for it: the case of a uid the platform picks (OpenShift, `docker
# run --user N`).  HADOOP_USER_NAME and SPARK_USER do not help, the lookup comes first.
# nss_wrapper (the image's libnss-wrapper) answers it from a copy of /etc/passwd with an entry
# added, so that /etc/passwd itself stays read-only.
uid=$(id -u)
if ! getent passwd "$uid" > /dev/null; then
  wrapper=""
  for candidate in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so /lib/*/libnss_wrapper.so; do
    if [ -s "$candidate" ]; then wrapper=$candidate; break; fi
  done
  if [ -n "$wrapper" ]; then
    gid=$(id -g)
    # an absolute home: the JVM's user.home, under which Spark keeps its Ivy cache
    home=/tmp
    if [ -n "${HOME:-}" ] && [ "${HOME:0:1}" = / ] && [ -d "$HOME" ] && [ -w "$HOME" ]; then home=$HOME; fi
    NSS_WRAPPER_PASSWD=$(mktemp)
    NSS_WRAPPER_GROUP=$(mktemp)
    { cat /etc/passwd; echo "mta:x:$uid:$gid:mta-windows:$home:/usr/sbin/nologin"; } > "$NSS_WRAPPER_PASSWD"
    cat /etc/group > "$NSS_WRAPPER_GROUP"
    getent group "$gid" > /dev/null || echo "mta:x:$gid:" >> "$NSS_WRAPPER_GROUP"
    export LD_PRELOAD="$wrapper${LD_PRELOAD:+ $LD_PRELOAD}" NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
  else
    echo "entrypoint.sh: warning: uid $uid has no entry in /etc/passwd and libnss_wrapper.so is not" \
      "installed: Spark will stop with \"Invalid UID\" (install libnss-wrapper, or run as a listed uid)" >&2
  fi
fi

# Bind Spark (driver, executors, master, workers) to this container's own
# address: mta-spark otherwise defaults SPARK_LOCAL_IP to 127.0.0.1, which the
# other containers cannot reach.  Left alone when set, or when the container
# has no address of its own (host networking).
if [ -z "${SPARK_LOCAL_IP:-}" ]; then
  address=$(getent ahostsv4 "$(hostname)" 2>/dev/null | awk 'NR == 1 {print $1}' || true)
  case "$address" in
    "" | 127.*) ;;
    *) export SPARK_LOCAL_IP="$address" ;;
  esac
fi

: "${SPARK_HOME:?SPARK_HOME is not set (the image sets it to the pyspark package)}"
: "${JAVA_HOME:?JAVA_HOME is not set (the image sets it to Java 17)}"

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-${SPARK_LOCAL_IP:-0.0.0.0}}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    # JVM options Spark passes to executors as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...
    java_opts=()
    while IFS= read -r opt; do
      [ -n "$opt" ] && java_opts+=("$opt")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//' || true)
    # configuration first: Spark's, then Hadoop's, which Spark mounts in the pods at
    # $HADOOP_CONF_DIR (from spark.kubernetes.hadoop.configMapName or the submitter's
    # HADOOP_CONF_DIR): without it on the classpath the executors miss core-site.xml and
    # hdfs-site.xml; then the jars and any additions
    classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}"
    [ -n "${HADOOP_CONF_DIR:-}" ] && classpath="$classpath:$HADOOP_CONF_DIR"
    classpath="$classpath:$SPARK_HOME/jars/*"
    [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
    [ -n "${SPARK_DIST_CLASSPATH:-}" ] && classpath="$classpath:$SPARK_DIST_CLASSPATH"
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  "")
    exec mta-spark --help
    ;;
  *)
    exec "$@"
    ;;
esac
