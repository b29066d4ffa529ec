#!/usr/bin/env bash
# A single-node Slurm on this machine, for tests and for trying deploy/slurm/tune-array.sh:
# munged, slurmctld and slurmd for this host, its GPUs (/dev/nvidiaN) as the generic resource
# `gpu` (without one, /dev/null stands in for one GPU, so that jobs asking for a GPU are
# scheduled), and everything they write (configuration, munge key and socket, state, logs,
# pid files) in one folder. It needs root (slurmd runs jobs as their user) and leaves the
# system's own Slurm and munge configuration alone.
#
#   bash scripts/slurm-local.sh install     as root: apt-get install Slurm and munge where
#                                           sbatch is missing (exit 3 when that cannot be done)
#   bash scripts/slurm-local.sh prefix      download the Debian packages of Slurm, munge and the
#                                           libraries they load into .slurm/ (git-ignored),
#                                           unpacked, for a machine without apt or network
#   bash scripts/slurm-local.sh start DIR   write DIR/slurm.conf and DIR/gres.conf, start the
#                                           daemons, wait until the node is idle and write
#                                           DIR/env.sh (source it to use sbatch, squeue, ...)
#   bash scripts/slurm-local.sh stop DIR    cancel the jobs and stop the daemons started in DIR
#
# Environment:
#   SLURM_PREFIX  run Slurm and munge from this unpacked prefix (`prefix` makes .slurm), not
#                 from the system: PATH, LD_LIBRARY_PATH, PluginDir and slurmstepd point into it
#
# Exit status: 0 done, 1 a daemon did not come up (its log follows), 2 bad usage, 3 Slurm
# cannot run here (not root, not installed and not installable).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}

die() {
    echo "slurm-local: $2" >&2
    exit "$1"
}

# The Debian packages a single-node Slurm runs from, and the libraries they load beyond the C
# library, zlib and the compression libraries every system has.
packages=(slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge libmunge2
    libhwloc15 libnuma1 liblz4-1 libjson-c5 liblua5.1-0 libyaml-0-2 libdbus-1-3 libgcrypt20
    libgpg-error0 libudev1 libsystemd0 libreadline8 libcap2 libpam0g libaudit1 libcap-ng0
    libbz2-1.0)

prefix=${SLURM_PREFIX:-}
if [[ -n "$prefix" ]]; then
    [[ "$prefix" == /* ]] || prefix=$root/$prefix
    [[ -x "$prefix/usr/sbin/slurmctld" || "$mode" == prefix ]] ||
        die 3 "SLURM_PREFIX=$prefix holds no usr/sbin/slurmctld (make it with: bash scripts/slurm-local.sh prefix)"
    export PATH="$prefix/usr/bin:$prefix/usr/sbin:$PATH"
fi
multiarch=x86_64-linux-gnu

case "$mode" in
install)
    command -v sbatch >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v munged >/dev/null && exit 0
    [[ $(id -u) -eq 0 ]] || die 3 "Slurm is not installed and installing it needs root"
    command -v apt-get >/dev/null || die 3 "Slurm is not installed and there is no apt-get"
    echo "slurm-local: installing ${packages[*]:0:6}" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${packages[@]:0:6}"; } >/tmp/slurm-local-install.log 2>&1; then
        tail -n 5 /tmp/slurm-local-install.log >&2
        die 3 "apt-get could not install Slurm (no network or no package source?)"
    fi
    # The packages start the system's own daemons where an init system runs; this script
    # starts its own, with their own configuration and ports.
    exit 0
    ;;
prefix)
    command -v apt-get >/dev/null || die 3 "no apt-get here to download the packages"
    dest=${prefix:-$root/.slurm}
    debs=$(mktemp -d)
    trap 'rm -rf "$debs"' EXIT
    # amd64 whatever this machine is: the GPU machine is x86-64.
    apt_opts=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o APT::Sandbox::User=root)
    if [[ $(dpkg --print-architecture) != amd64 ]]; then
        apt_opts+=(-o Dir::State::Lists=/tmp/slurm-local-amd64-lists)
        mkdir -p /tmp/slurm-local-amd64-lists/partial
        apt-get "${apt_opts[@]}" update -qq
    fi
    (cd "$debs" && apt-get "${apt_opts[@]}" download -qq "${packages[@]}") ||
        die 3 "apt-get download failed (run apt-get update first; is there network?)"
    rm -rf "$dest"
    mkdir -p "$dest"
    for deb in "$debs"/*.deb; do
        dpkg-deb -x "$deb" "$dest"
    done
    # The daemons' plain names, which Debian gives them through update-alternatives.
    for exe in "$dest"/usr/sbin/*-wlm; do
        ln -sf "$(basename "$exe")" "${exe%-wlm}"
    done
    # What a daemon never reads: documentation, the packages' own service files and defaults.
    for sub in usr/share etc lib/systemd usr/lib/systemd usr/include var run; do
        rm -rf "${dest:?}/$sub"
    done
    printf '%s\n' "${packages[@]}" > "$dest/PACKAGES"
    echo "slurm-local: unpacked ${#packages[@]} packages into $dest ($(du -sh "$dest" | cut -f1))"
    exit 0
    ;;
start | stop)
    dir=${2:-}
    [[ -n "$dir" ]] || die 2 "usage: $0 $mode DIR"
    ;;
*)
    sed -n '2,/^set /p' "$0" | grep -v '^set ' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# stop_daemons NAME...: ends the daemons whose pid files DIR/NAME.pid name, each only if its
# command line names this folder (so a reused pid of another process is never signalled):
# TERM to all at once, KILL to any still there after 10 s.
stop_daemons() {
    local name pid alive pids=()
    for name in "$@"; do
        pid=$(cat "$dir/$name.pid" 2>/dev/null || true)
        if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then
            kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
        fi
        rm -f "$dir/$name.pid"
    done
    for _ in $(seq 100); do
        alive=0
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive)) || return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
}

if [[ "$mode" == stop ]]; then
    if [[ -f "$dir/slurm.conf" && -f "$dir/slurmctld.pid" ]]; then
        # Jobs first, so no task outlives its daemons.
        ids=$(SLURM_CONF=$dir/slurm.conf squeue -h -o %A 2>/dev/null || true)
        if [[ -n "$ids" ]]; then
            # shellcheck disable=SC2086
            SLURM_CONF=$dir/slurm.conf scancel $ids 2>/dev/null || true
            for _ in $(seq 25); do
                [[ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %A 2>/dev/null)" ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_daemons slurmd slurmctld munged
    echo "slurm-local: stopped the daemons of $dir"
    exit 0
fi

# start
[[ $(id -u) -eq 0 ]] || die 3 "a local Slurm needs root (slurmd starts jobs as their user)"
for exe in munged slurmctld slurmd sbatch; do
    command -v "$exe" >/dev/null ||
        die 3 "no $exe here: bash scripts/slurm-local.sh install (as root), or SLURM_PREFIX=.slurm after 'prefix'"
done
[[ -f "$dir/slurmctld.pid" ]] && die 2 "$dir already holds a running Slurm (stop it first)"

# In a prefix: Slurm's own library and plugins from it, and of the other libraries only
# those the system lacks (a library the system has stays the one its programs use).
libpath=
plugindir=/usr/lib/$multiarch/slurm-wlm
stepd=$(command -v slurmstepd || true)
if [[ -n "$prefix" ]]; then
    plugindir=$prefix/usr/lib/$multiarch/slurm-wlm
    stepd=$prefix/usr/sbin/slurmstepd
    mkdir -p "$dir/lib"
    rm -f "$dir/lib"/*
    # The libraries the system's loader knows, by file name.
    known=$( (ldconfig -p 2>/dev/null || true) | awk 'NR > 1 { print $1 }')
    for lib in "$prefix/usr/lib/$multiarch"/*.so* "$prefix/lib/$multiarch"/*.so*; do
        [[ -e "$lib" ]] || continue
        name=$(basename "$lib")
        grep -qxF "$name" <<< "$known" || ln -sf "$lib" "$dir/lib/$name"
    done
    libpath=$plugindir:$dir/lib
    export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
[[ -x "$stepd" ]] || die 3 "no slurmstepd beside slurmd"

# Two free ports on the loopback interface.
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ "$slurmd_port" == "$ctld_port" ]]; do slurmd_port=$(free_port); done

# The short host name, which slurmctld looks for in SlurmctldHost (uname: `hostname` is not in
# every image).
node=$(uname -n)
node=${node%%.*}
cpus=$(nproc)
# The node's GPUs as the generic resource gpu. Slurm counts a GPU only with a device file;
# without one, /dev/null stands in for one GPU.
devices=()
for d in /dev/nvidia[0-9]*; do
    [[ -c "$d" ]] && devices+=("$d")
done
if ((${#devices[@]} > 0)); then
    gpus=${#devices[@]}
    gres_line="NodeName=$node Name=gpu File=$(IFS=,; echo "${devices[*]}")"
else
    gpus=1
    gres_line="NodeName=$node Name=gpu File=/dev/null"
fi

mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 755 "$dir/munge"
if [[ ! -s "$dir/munge/munge.key" ]]; then
    (umask 077 && head -c 1024 /dev/urandom > "$dir/munge/munge.key")
fi
chmod 400 "$dir/munge/munge.key"

cat > "$dir/slurm.conf" <<EOF
# A single-node Slurm written by scripts/slurm-local.sh; everything it writes is in $dir.
ClusterName=tunelocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
PluginDir=$plugindir
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: processes are tracked through /proc, tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# A line per finished job (state, exit code) in one text file.
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Finished jobs stay visible to scontrol for an hour.
MinJobAge=3600
InactiveLimit=0
KillWait=5
Waittime=0
# The node is what this file says, whatever the hardware detection finds.
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:$gpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
echo "$gres_line" > "$dir/gres.conf"
# slurmd sets up a cgroup for its step daemons whatever the plugins above say; where systemd's
# D-Bus is not there (containers, sandboxes) it makes that cgroup itself.
cat > "$dir/cgroup.conf" <<EOF
IgnoreSystemdOnFailure=yes
EOF
# Without systemd nothing made the slice it puts that cgroup in (cgroup v2 only).
if [[ -f /sys/fs/cgroup/cgroup.controllers && ! -d /sys/fs/cgroup/system.slice ]]; then
    mkdir /sys/fs/cgroup/system.slice 2>/dev/null || true
fi
{
    echo "export SLURM_CONF=$dir/slurm.conf"
    if [[ -n "$prefix" ]]; then
        echo "export PATH=$prefix/usr/bin:$prefix/usr/sbin:\$PATH"
        echo "export LD_LIBRARY_PATH=$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    fi
} > "$dir/env.sh"
export SLURM_CONF=$dir/slurm.conf

# show_log NAME: the end of a daemon's log, after a failure.
show_log() {
    echo "--- $dir/log/$1.log (end)" >&2
    tail -n 20 "$dir/log/$1.log" >&2 2>/dev/null || echo "(no log)" >&2
}
fail() {
    echo "slurm-local: $1" >&2
    for log in munged slurmctld slurmd; do show_log "$log"; done
    bash "$0" stop "$dir" >&2 || true
    exit 1
}

munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" < /dev/null > /dev/null 2>> "$dir/log/munged.log" ||
    fail "munged did not start"
slurmctld -f "$dir/slurm.conf" < /dev/null > /dev/null 2>> "$dir/log/slurmctld.log" ||
    fail "slurmctld did not start"
slurmd -f "$dir/slurm.conf" -N "$node" -d "$stepd" < /dev/null > /dev/null 2>> "$dir/log/slurmd.log" ||
    fail "slurmd did not start"

# Ready when the node is idle (slurmd registered with slurmctld).
state=
for _ in $(seq 150); do
    state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
    [[ "$state" == idle ]] && break
    sleep 0.2
done
[[ "$state" == idle ]] || fail "the node did not become idle within 30 s (state: '${state:-no answer}')"
echo "slurm-local: running in $dir: node $node, $cpus CPUs, gpu:$gpus ($gres_line), slurmctld port $ctld_port${prefix:+, from $prefix}"
echo "slurm-local: source $dir/env.sh to use it; stop it with: bash scripts/slurm-local.sh stop $dir"
