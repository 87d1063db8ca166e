# Sourced by the set-up scripts: installs Debian packages where they are missing and records
# what it installed, so that contrib/setup/fresh.sh can take the machine back to what it had.
# A package that was there before is never recorded (nor ever purged).

HARNESS_STATE=${HARNESS_BROKERS_STATE:-/var/tmp/harness-brokers}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=""
ensure_packages() {  # package...
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    printf 'setup: installing %s from Debian'"'"'s packages\n' "${missing[*]}" >&2
    if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
    # Debian's policy-rc.d may forbid starting services on install; the scripts start them.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    as_root mkdir -p "$HARNESS_STATE"
    printf '%s\n' "${missing[@]}" | as_root tee -a "$HARNESS_STATE/installed-packages" >/dev/null
}
# A system file the set-up edits, kept as it was before its first edit (a missing one as a
# marker), for fresh.sh to put back.
keep_original() {  # path...
    as_root mkdir -p "$HARNESS_STATE/original"
    local path kept
    for path in "$@"; do
        kept="$HARNESS_STATE/original/$(echo "$path" | tr / %)"
        [ -e "$kept" ] || [ -e "$kept.absent" ] && continue
        if [ -e "$path" ]; then as_root cp -p "$path" "$kept"; else as_root touch "$kept.absent"; fi
    done
}
